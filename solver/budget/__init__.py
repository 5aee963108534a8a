"""The time budget: every calibrated constant and policy number, with its measurement.

Why one module: ``auto``, ``cpsat``, ``ilp``, the relaxations, the re-timing, the zero-bubble grid
and the local search all size their phases from the *nominal* time limit with these per-op costs
and shares (never from the clock, so an answer repeats), and they must agree on them. A constant
marked *measured* says what was timed; one marked *policy* is a choice, and the checks below are
what would show it wrong. Re-measure after changing the code a constant times:

- the per-op cost of each phase (:class:`PerOpCosts`, one record): ``python benchmarks/phase_costs.py``;
- CP-SAT's deterministic clock and load overshoots: ``python benchmarks/cpsat_dtime.py``
  (``--only zb --time-limit 60`` for the memory-resource rate);
- every per-op cost and share together, "does auto return within its limit":
  ``python benchmarks/auto_time_limits.py``; that budgets stop on the deterministic clock, not the
  wall: ``python benchmarks/determinism.py``;
- what the shares buy: ``python benchmarks/unit_costs.py`` and ``python benchmarks/zb_paper.py``;
- the ILP's build cost per pair: ``python benchmarks/ilp_backends.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.instance import Instance
from .clock import Budget as Budget
from .clock import note_wall_cut as note_wall_cut
from .clock import records_wall_cuts as records_wall_cuts
from .clock import wall_cuts as wall_cuts
from .per_op import PER_OP as PER_OP
from .per_op import PerOpCosts as PerOpCosts

# --- CP-SAT's deterministic clock -------------------------------------------------------------

#: Deterministic-time units per wall-clock second we budget (CP-SAT's unit is meant to be close
#: to a second on an unloaded core; on a shared machine it runs slower, so keep margin).
#: Policy: a margin below the rate ``python benchmarks/cpsat_dtime.py`` measures.
DTIME_PER_SECOND = 0.9
#: The same for models of precedences and no-overlaps only (:attr:`CpsatModel.precedences_only`):
#: there CP-SAT's deterministic clock runs at only 0.13-0.17 units per wall second on an idle
#: machine (``python benchmarks/cpsat_dtime.py``), so 0.9 would never bind and an unproven search
#: would stop on the wall clock, where its answer may not repeat. 0.12 stops it first on an idle or
#: lightly loaded machine, and still leaves the hardest p <= 8 unit-cost proof (0.08 units) room.
PRECEDENCES_DTIME_PER_SECOND = 0.12
#: The same for models with a cumulative or reservoir for memory (:func:`pipesched.solver.exact.cpsat.formulation.needs_memory_resource`):
#: on the zero-bubble paper cases, once the search runs, 0.43-0.73 units per wall second with two
#: workers on an idle machine (``python benchmarks/cpsat_dtime.py --only zb --time-limit 60``), after a
#: start of a few seconds at about 0.02 units per second. 0.3 stops a long search on its deterministic
#: limit at about two thirds of its wall time; short searches (a few seconds) still end on the wall.
RESOURCE_DTIME_PER_SECOND = 0.3

# --- sizes and overshoots of the phases (wall seconds; per-op costs: per_op.py) ------------------

#: Largest op count for which the optimal fixed-order timing (Bellman-Ford rounds) is affordable.
#: Policy: at :attr:`PerOpCosts.retime` the exact re-timing of 800 ops is charged 1.2 s, about a tenth of a
#: 10 s limit.
EXACT_TIMING_OPS = 800
#: Wall seconds a CP-SAT solve may run past ``max_time_in_seconds``: loading the model and the first
#: hint search do not look at the clock (measured 0.2-0.4 s on 400-1500-op memory-capped models, even
#: with a 0.05 s limit). Callers with a deadline stop the search this much earlier.
#: Re-measured by ``python benchmarks/cpsat_dtime.py`` (each solve's wall time against its limit).
CPSAT_OVERSHOOT_S = 0.3
#: The same for precedence-only models (no LP, no cumulative to load): a whole proof at 1536 ops took
#: 0.13 s of wall (``python benchmarks/cpsat_dtime.py``), so loading is well under this.
PRECEDENCES_OVERSHOOT_S = 0.1

#: CP-SAT's first root LP does not look at the clock: at 1536 ops it ran 1.5-2 s past a 1 s limit
#: (single worker or interleaved), 0.3 s past without it on one worker, and still 1.1 s past on two
#: (the portfolio's own LP workers). Searches whose wall budget is below this many seconds per op run
#: on one worker without the linear relaxation.
#: Re-measured by ``python benchmarks/cpsat_setup.py``.
LP_S_PER_OP = 1.2e-3
#: On models with a memory cumulative the root set-up grows with the square of each device's op count
#: and does not look at the clock either: the cumulative's linear relaxation and the root probing took
#: 0.21 s at 48 ops per device (p = 4, m = 16) and 6.9 s at 192 (p = 16, m = 64), 1.1-2.3e-5 s per pair
#: of ops on one device, on one core with the other busy (``python benchmarks/cpsat_setup.py``); the
#: constant is above the largest rate. A search planned for less than this times the sum over devices
#: of (ops on it)^2 skips both; with them, a 10 s ``auto`` at p = 16, m = 64 ran 16 s (docs/limits.md).
SETUP_S_PER_PAIR = 2.5e-5


#: Seconds kept back at the end of ``auto`` and ``cpsat`` for reading the answer, re-timing and
#: validating it: a fixed part and a part per op (policy margins, set in 9ffa504 / 6168dfa; the
#: short-limit tests in ``tests/solver/test_auto.py`` check that answers come back within the limit).
FINISH_S = 0.1
FINISH_S_PER_OP = 3e-5
#: Least seconds of actual search that make starting a full-model CP-SAT run worthwhile (policy).
SEARCH_MIN_S = 0.1

# --- shares and sizes of the portfolio's phases --------------------------------------------------

#: The phases of method ``cpsat``, as shares of the nominal limit ``T`` (policy; every phase also
#: checks its estimated cost, so a share is a ceiling): the zero-bubble grid is sized for
#: ``CPSAT_GRID_SHARE * T`` with a wall net at ``CPSAT_GRID_STOP * T``; the local search's wall net is
#: ``CPSAT_POLISH_STOP * T``; the search plans with ``CPSAT_SEARCH_SHARE * T`` nominal seconds.
CPSAT_GRID_SHARE = 0.25
CPSAT_GRID_STOP = 0.4
CPSAT_POLISH_STOP = 0.5
CPSAT_SEARCH_SHARE = 0.6
#: Share of the deterministic budget a full-model search may use (``auto`` and ``cpsat``): the rest
#: covers the wall time CP-SAT spends before its deterministic clock starts (loading, first LP).
#: Policy; ``python benchmarks/determinism.py`` shows the searches still stop on their deterministic limit.
SEARCH_DTIME_SHARE = 0.8
#: Share of the nominal limit ``auto`` spends re-timing its best heuristic orders optimally.
#: Policy: with the grid's and the local search's shares it keeps the heuristic phases near half the limit;
#: ``python benchmarks/auto_time_limits.py`` checks that ``auto`` returns within its limit.
RETIME_SHARE = 0.2
#: How many of the best heuristic orders ``auto`` re-times optimally; the portfolio holds no more than
#: these while it collects candidates (at 98k ops each order held costs 10-40 MB: holding all 14 of a
#: 60 s solve took it to 509 MB, ``python benchmarks/large_problems.py``).
RETIMED_ORDERS = 2
#: Share of the nominal budget the local search on the warm start may use (:mod:`pipesched.solver.heuristics.swap_past_w`).
#: Policy, like :data:`RETIME_SHARE` (``python benchmarks/auto_time_limits.py``).
POLISH_SHARE = 0.1
#: Share of the remaining budget spent on the relaxation bound when the gap is open.
#: Policy: a quarter, so the search keeps three; ``python benchmarks/bound_tightness.py`` shows what the
#: bound buys.
BOUND_SHARE = 0.25
#: Least nominal seconds that share must be for the relaxations to run: their CP-SAT solves spend the
#: first seconds loading at about 0.003 deterministic units per second (``benchmarks/cpsat_dtime.py``:
#: 14.6B m=48 2p at a 2 s limit), so a shorter phase only ever ends on the wall clock, and the bound
#: it returns would depend on the machine's load.
#: Re-measured by ``python benchmarks/cpsat_dtime.py``.
RELAX_MIN_S = 2.0
#: Problems up to this many ops skip the relaxations: CP-SAT on the full model closes them directly.
#: Policy: ``python benchmarks/unit_costs.py`` shows CP-SAT closing the problems of this size it can.
SMALL_OPS = 1000
#: Above this many ops the full model is skipped: CP-SAT's propagation on it is so slow that a single
#: search task overruns any time limit (measured: 27 s for one task at 12k ops) without improving.
#: Policy: a third of the size that measurement was made at.
FULL_MODEL_OPS = 4000
#: Small problems first get up to this many seconds of CP-SAT's sequential search (one worker, no
#: portfolio): on memory-tight unit-cost cases it proves in about 1 s what the interleaved portfolio
#: leaves open (measured: 7 of 16 open p <= 8 cases, vs 2); the portfolio gets what is left. Not on
#: models with a memory cumulative: there its first seconds barely move CP-SAT's deterministic clock, so
#: it would always stop on the wall and hand a load-dependent incumbent to the portfolio.
#: Re-measured by ``python benchmarks/unit_costs.py``.
SINGLE_MAX_S = 2.0


def retime_cost(inst: Instance) -> float:
    """Estimated wall seconds of :func:`pipesched.solver.timing.retime.retime` (only the exact stage-span timing costs much)."""
    ops = inst.num_ops
    exact = inst.objective == "stage_span" and ops <= EXACT_TIMING_OPS
    return PER_OP.retime * ops if exact else PER_OP.compact * ops


#: The per-op costs here are idle-core figures about doubled for a shared machine: the slowdown they cover.
#: Policy: the factor the per-op costs were rounded up by; ``python benchmarks/phase_costs.py`` prints each
#: cost's margin.
SHARED_SLOWDOWN = 2.0
#: Least wall seconds a phase must last before its wall / CPU ratio is read as the machine's slowdown.
#: Policy: a shorter phase's ratio is timer noise.
SLOWDOWN_MIN_S = 0.05


def slowdown(wall: float, cpu: float) -> float:
    """How much slower than an idle core a single-threaded phase ran (wall / CPU seconds; 1 for a phase
    too short to tell). Only wall-clock nets read it, never a decision of what to run."""
    return wall / cpu if wall >= SLOWDOWN_MIN_S and cpu > 0 else 1.0


def finish_margin(inst: Instance, slowed: float = 1.0) -> float:
    """Seconds kept back for reading the answer, re-timing and validating it (grows with the op count),
    stretched when the machine is measured ``slowed`` times slower than an idle core, beyond what the
    per-op figures already cover (issue 12: at a load average of 14, finalize at 98k ops took 20 s)."""
    return (FINISH_S + (FINISH_S_PER_OP + PER_OP.finalize) * inst.num_ops) * max(1.0, slowed / SHARED_SLOWDOWN)


def search_cost(inst: Instance) -> float:
    """Least wall seconds a full-model CP-SAT search must have to be worth starting: building the
    model, CP-SAT's load overshoot, re-timing the answer, and :data:`SEARCH_MIN_S` of search."""
    return PER_OP.build * inst.num_ops + CPSAT_OVERSHOOT_S + retime_cost(inst) + SEARCH_MIN_S


def trials_for(inst: Instance, seconds: float) -> int:
    """How many trial swaps of :func:`pipesched.solver.heuristics.swap_past_w.polish` fit in a nominal
    budget of ``seconds`` (deterministic: a count, not a clock)."""
    return int(seconds / (PER_OP.trial * max(1, inst.num_ops)))


# --- sizes of the zero-bubble grid (:mod:`pipesched.solver.heuristics.zero_bubble`) -------------

#: Op-policy products the grid may simulate; larger problems try fewer policies, in priority order.
GRID_WORK = 250_000
#: Op-policy products built and timed per nominal second (measured ~40k/s on one unloaded core at
#: 1.5k ops; halved for a shared machine). A time budget caps the grid at ``seconds * rate / ops``.
#: Kept this conservative below :data:`FULL_MODEL_OPS` (where bounds, recipes and CP-SAT follow the grid
#: and need their share even on a busy machine) although the grid is now faster (see the next constant).
GRID_OPS_PER_SECOND = 20_000
#: Most policies the grid tries on any problem: the head (:data:`~pipesched.solver.heuristics.zb_policies.HEAD`, chosen on the tuning set) plus the
#: first of the rest; set in 0c01842 together with the stage-scaled warm-up (policy).
GRID_MAX_POLICIES = 48
#: Most extra policies the scale search (:mod:`pipesched.solver.heuristics.zb_refine`) tries after the
#: grid, within what the nominal budget still affords: each costs one grid policy; sixteen cover the
#: four step sizes with a few moves each.
REFINE_POLICIES = 16


# --- sizes of the bounds (:mod:`pipesched.solver.bounds.analytic`) -------------------------------

#: Above this many ops the per-op (microbatch rank) bound is skipped to keep bounds cheap.
#: Policy: bounds stay well under a second; ``python benchmarks/bound_tightness.py`` shows what each bound
#: gives.
RANK_BOUND_MAX_OPS = 20_000
#: The same for the per-device span version, which costs ``O(p · m · S)`` (policy, like :data:`RANK_BOUND_MAX_OPS`).
RANK_SPAN_MAX_WORK = 10_000


# --- the ILP (:mod:`pipesched.solver.exact.ilp.method`) --------------------------------------------

#: Largest number of same-device op pairs (order binaries before fixing) the method accepts:
#: building the model costs about 0.1 ms per pair in Python (p=16, m=32: 73k pairs, 7 s).
#: Re-measured by ``python benchmarks/ilp_backends.py``.
MAX_PAIRS = 100_000
#: Seconds to build the model per pair, measured (see above); used to keep within the time limit.
#: Re-measured by ``python benchmarks/ilp_backends.py``.
BUILD_SECONDS_PER_PAIR = 1e-4
#: Build the ILP only when its estimated build time is at most this share of what is left; else the
#: warm start is the answer (policy: the search needs the rest).
ILP_BUILD_SHARE = 0.5
#: Share of the remaining seconds handed to the ILP solver, and the seconds kept for starting it
#: (HiGHS runs in a fresh process; CBC in this one), set in 1d72dc0 ("time budget margin").
#: Policy margins, checked by ``python benchmarks/ilp_backends.py`` (wall time against the limit).
ILP_SOLVE_SHARE = 0.97
HIGHS_START_S = 0.3
CBC_START_S = 0.05


# --- large problems and the wall-clock guard (issue 12) -------------------------------------------

#: Resident memory per op of a solve, above the interpreter's own ~100 MB (pipesched, pydantic and
#: OR-Tools imported), for the heuristics, re-timing and schedule: peak RSS 325 MB at 98k ops (2.3 KB
#: per op), 154 MB at 24.6k ops (2.2 KB per op), both with a 60 s limit: ``python
#: benchmarks/large_problems.py``. The full CP-SAT model (up to ``FULL_MODEL_OPS``) adds up to about
#: 200 MB whatever its size. The documented bound (docs/limits.md) is this figure per op plus that.
MEMORY_BYTES_PER_OP = 4_000


@dataclass(frozen=True)
class SizeClass:
    """How ``auto`` shares its limit among the heuristic phases on problems of one size class. Two
    classes because above :data:`FULL_MODEL_OPS` ops no CP-SAT model follows the heuristics: nothing
    after them looks for a better order but the local search, so they get more of the limit."""

    #: Share of the nominal limit the zero-bubble grid is sized for
    #: (:func:`pipesched.solver.heuristics.zb_policies.policies`).
    grid_share: float
    #: Share of the limit after which (wall clock) the heuristics stop once one order is found.
    heuristic_share: float
    #: Op-policy products of the grid built and timed per nominal second (:func:`grid_seconds`).
    grid_ops_per_second: float


#: Problems CP-SAT's full model still follows. Policy: the heuristics' orders are every later phase's
#: start, and ``auto`` must never be worse than a recipe it contains, so they get the largest share
#: (also the least they are charged, :mod:`pipesched.solver.portfolio.candidates`); their own estimates
#: decide within it. ``python benchmarks/zb_paper.py`` shows what the grid finds at its share.
MODELLED = SizeClass(grid_share=0.25, heuristic_share=0.4, grid_ops_per_second=GRID_OPS_PER_SECOND)
#: Above :data:`FULL_MODEL_OPS` ops (policy: the retiming and polish shares stay as they are, and the
#: finish margin covers the rest). The grid is the whole search there and the wall-clock net, not the
#: estimate, protects the limit, so its rate is the measured one: since f3427f9 one order and its timing
#: take 0.15 s of CPU at 24.6k ops and 0.76 s at 98k ops (``python benchmarks/large_problems.py`` prints
#: it), about 130k/s; halved for a shared machine and rounded down.
HEURISTICS_ONLY = SizeClass(grid_share=0.5, heuristic_share=0.65, grid_ops_per_second=60_000)


def size_class(inst: Instance) -> SizeClass:
    """The size class of ``inst``: whether a CP-SAT model will follow its heuristics."""
    return HEURISTICS_ONLY if inst.num_ops > FULL_MODEL_OPS else MODELLED


def grid_share(inst: Instance) -> float:
    """Share of the nominal limit the zero-bubble grid is sized for (larger where no model follows)."""
    return size_class(inst).grid_share


def grid_seconds(inst: Instance, limit: float) -> float:
    """The nominal seconds to size the grid with (:func:`pipesched.solver.heuristics.zb_policies.policies`
    counts them at :data:`GRID_OPS_PER_SECOND`): its share of ``limit``, scaled to its class's rate."""
    c = size_class(inst)
    seconds = c.grid_share * limit
    if c.grid_ops_per_second == GRID_OPS_PER_SECOND:  # exactly the share: x * r / r need not be x in floats
        return seconds
    return seconds * c.grid_ops_per_second / GRID_OPS_PER_SECOND


def heuristic_share(inst: Instance) -> float:
    """Share of the limit after which (wall clock) the heuristics stop once one order is found."""
    return size_class(inst).heuristic_share


def setup_cost(inst: Instance) -> float:
    """Estimated wall seconds of the first schedule (one grid order, its timing, finalize)."""
    return PER_OP.setup * inst.num_ops


# --- auto's recipes and small problems (:mod:`pipesched.solver.portfolio.candidates`, ``.small``) ---

#: The V tight-cap orders' second search (:mod:`pipesched.solver.heuristics.v_memory`): the interleaved
#: critical-chain search (:func:`~pipesched.solver.heuristics.interleaved_local.local_search`) from each
#: order found, on this many trials per trial of the first search (a count; more trials only ever add
#: orders). Chosen on the V tuning set (14.6B and 28.3B, p = 4 and 8, m = 2p and 4p, caps 1p and 1.5p;
#: 1.5B and 6.2B p = 4, m = 8) at the 10 s and 60 s counts: 0.5 gave 0.14-0.75% lower on 9 of the 10
#: 1p cases and nothing at 1.5p; 1.0 adds 0.02-0.60% at 1.5p on 3 cases at 60 s (6.2B p4 m8: 644.61 ->
#: 640.77), 2.0 only 0.02% more on two. It is not in the charge of ``auto``'s candidates (1.6e-5 s per op
#: and trial of the first search; measured 1e-6 to 3e-6 per op and trial of either): the charge covers both.
#: Policy until the V tuning set is drawn in ``benchmarks/cases.py``; ``python benchmarks/v_placement.py``
#: re-checks it.
V_LOCAL_SEARCH_SHARE = 1.0
#: The V tight-cap orders' wide grid (:func:`pipesched.solver.heuristics.v_memory.wide_candidates`) runs
#: ``VM_WIDE``'s policies in the order ``V_WIDE_GRID_ORDER``, data beside that set in
#: :mod:`pipesched.solver.heuristics.listsched.policies` (``benchmarks/tune_list_policies.py --set v-wide``
#: chose it). Policies of that grid per trial of the V order search (a count): one policy costs about 3.3 timings
#: (7.6e-6 against 2.3e-6 s per op, 14.6B p8 m32 1.5p), so the grid costs about what the first search
#: does; all 96 run from 60 s at p = 8, m = 32, the first 54 at 10 s and 1152 ops (policy).
V_WIDE_GRID_PER_TRIAL = 1.0
#: How many places an op may jump in one move of the interleaved order search
#: (:mod:`pipesched.solver.heuristics.interleaved_local`): 8 beat 4 on its tuning set (mean 0.87% against
#: 0.82% below the better of IZB and the interleaved greedy, never worse on a case).
#: Policy until its tuning set is drawn in ``benchmarks/cases.py``; ``python benchmarks/anchors.py --only
#: interleaved`` re-checks it.
INTERLEAVED_LOCAL_REACH = 8
#: How many of the best start orders that search goes on to once the two best are searched and trials
#: are left (8 against 2 on its tuning set with trials to spare: 0.05-0.41% lower on 6 of 12 cases, never
#: higher; the two best first, so a short budget gives what it gave before).
#: Policy, like :data:`INTERLEAVED_LOCAL_REACH`.
INTERLEAVED_LOCAL_STARTS = 8
#: Share of the nominal limit ``auto`` gives that search (a count of trials, so the answer repeats).
#: Policy: run to its end at 60 s on the anchors' sizes (385-2753 trials at 192-1536 ops), where CP-SAT
#: on these capped models does not improve the heuristics' best; at 10 s it stops partway on the larger ones.
INTERLEAVED_SEARCH_SHARE = 0.3
#: Problems up to this many ops go to the ILP before CP-SAT (``docs/design/v-tiny-diagnosis.md``).
#: Policy: the largest size of the sweep the ILP proved every case of
#: (:mod:`pipesched.solver.portfolio.small`).
ILP_FIRST_OPS = 48
#: Share of the nominal seconds left after the heuristics that this ILP may use (policy: the slowest
#: proof of a 30-problem sweep took 3.5 s of a 6 s rest under load; CP-SAT gets the remainder).
ILP_FIRST_SHARE = 0.8
#: Least nominal seconds that share must be: HiGHS runs in a fresh process (``HIGHS_START_S``) and the
#: model is written to files first, so a shorter ILP run would only overrun a short limit (policy).
ILP_FIRST_MIN_S = 0.5


# --- exact models with overlapped F&B pairs (:mod:`pipesched.solver.exact.cpsat.overlap`) -------------

#: Largest op count the CP-SAT model with F&B pairs takes (``costs.overlap_fb``): its pair literals grow
#: as (ops per device)^2 / 4 per device before the window pruning (policy; dual p = 4, m = 16 is 192 ops;
#: ``python benchmarks/dualpipe_exact.py`` shows what it proves at which size).
PAIRED_MAX_OPS = 200
#: CP-SAT workers for the paired model, whatever ``SolveOptions.workers`` says: with two, CP-SAT's
#: interleaved (deterministic) search reports a proof only when its running batch of subsolver tasks
#: ends, and those tasks run for tens of seconds here (a logged 60 s run of dual p = 2, m = 8
#: proved at 23.6 s and answered at 59.5 s; one worker answered in 15.7 s). One worker is also
#: deterministic (policy, ``python benchmarks/dualpipe_exact.py``).
PAIRED_WORKERS = 1


# --- overlapped F&B pairs in auto (:mod:`pipesched.solver.portfolio.paired`) ---------------------

#: Share of ``auto``'s nominal limit the main portfolio gets on the pair-free copy of a problem with
#: ``costs.overlap_fb`` when the paired CP-SAT model also applies (:mod:`pipesched.solver.portfolio.paired`);
#: the paired search gets the rest, warm-started from the best schedule so far (policy: half each).
PAIRED_PLAIN_SHARE = 0.5

"""The time budget: every calibrated constant and policy number, with its measurement.

Why one module: ``auto``, ``cpsat``, the relaxations, the re-timing and the local search all size
their phases from the *nominal* time limit with these per-op costs and shares (never from the
clock, so an answer repeats), and they must agree on them. Each constant says what was measured
and with which command; re-run that command after changing the code it times.
"""

from __future__ import annotations

from .core.instance import Instance

# --- CP-SAT's deterministic clock -------------------------------------------------------------

#: Deterministic-time units per wall-clock second we budget (CP-SAT's unit is meant to be close
#: to a second on an unloaded core; on a shared machine it runs slower, so keep margin).
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

# --- per-op costs of the phases (wall seconds) ---------------------------------------------------

#: Largest op count for which the optimal fixed-order timing (Bellman-Ford rounds) is affordable.
EXACT_TIMING_OPS = 800
#: Measured wall seconds per op of one exact stage-span re-timing (its Dinkelbach rounds of pure-Python
#: Bellman-Ford): 0.72 s for a near-optimal 576-op zero-bubble order on an idle core, 1.25 ms/op. The
#: earlier 0.5 ms/op let ``auto`` end 0.6-0.7 s past a 60 s limit on the paper cases.
RETIME_S_PER_OP = 1.5e-3
#: Measured wall seconds per op (one core, about doubled for a shared machine) of building the full model.
BUILD_S_PER_OP = 1e-4
#: Wall seconds a CP-SAT solve may run past ``max_time_in_seconds``: loading the model and the first
#: hint search do not look at the clock (measured 0.2-0.4 s on 400-1500-op memory-capped models, even
#: with a 0.05 s limit). Callers with a deadline stop the search this much earlier.
CPSAT_OVERSHOOT_S = 0.3
#: The same for precedence-only models (no LP, no cumulative to load): a whole proof at 1536 ops took
#: 0.13 s of wall (``python benchmarks/cpsat_dtime.py``), so loading is well under this.
PRECEDENCES_OVERSHOOT_S = 0.1

#: CP-SAT's first root LP does not look at the clock: at 1536 ops it ran 1.5-2 s past a 1 s limit
#: (single worker or interleaved), 0.3 s past without it on one worker, and still 1.1 s past on two
#: (the portfolio's own LP workers). Searches whose wall budget is below this many seconds per op run
#: on one worker without the linear relaxation.
LP_S_PER_OP = 1.2e-3

#: Measured wall seconds per op (one core, about doubled for a shared machine) of one classic recipe
#: or greedy run (incl. its validation) and of the relaxations' set-up .
RECIPE_S_PER_OP = 3e-4
RELAX_S_PER_OP = 1.5e-4

# --- shares and sizes of the portfolio's phases --------------------------------------------------

#: Share of the nominal budget the local search on the warm start may use (:mod:`pipesched.solver.heuristics.swap_past_w`).
POLISH_SHARE = 0.1
#: Share of the remaining budget spent on the relaxation bound when the gap is open.
BOUND_SHARE = 0.25
#: Least nominal seconds that share must be for the relaxations to run: their CP-SAT solves spend the
#: first seconds loading at about 0.003 deterministic units per second (``benchmarks/cpsat_dtime.py``:
#: 14.6B m=48 2p at a 2 s limit), so a shorter phase only ever ends on the wall clock, and the bound
#: it returns would depend on the machine's load.
RELAX_MIN_S = 2.0
#: Problems up to this many ops skip the relaxations: CP-SAT on the full model closes them directly.
SMALL_OPS = 1000
#: Above this many ops the full model is skipped: CP-SAT's propagation on it is so slow that a single
#: search task overruns any time limit (measured: 27 s for one task at 12k ops) without improving.
FULL_MODEL_OPS = 4000
#: Small problems first get up to this many seconds of CP-SAT's sequential search (one worker, no
#: portfolio): on memory-tight unit-cost cases it proves in about 1 s what the interleaved portfolio
#: leaves open (measured: 7 of 16 open p <= 8 cases, vs 2); the portfolio gets what is left. Not on
#: models with a memory cumulative: there its first seconds barely move CP-SAT's deterministic clock, so
#: it would always stop on the wall and hand a load-dependent incumbent to the portfolio.
SINGLE_MAX_S = 2.0
#: After this share of the budget the portfolio stops trying further recipes.
HEURISTIC_SHARE = 0.4
#: Share of the nominal budget the zero-bubble grid is sized for (:func:`pipesched.solver.heuristics.zero_bubble.policies`).
GRID_SHARE = 0.25


def retime_cost(inst: Instance) -> float:
    """Estimated wall seconds of :func:`pipesched.solver.timing.retime.retime` (only the exact stage-span timing costs much)."""
    ops = inst.num_ops
    exact = inst.objective == "stage_span" and ops <= EXACT_TIMING_OPS
    return RETIME_S_PER_OP * ops if exact else 5e-5 * ops


def finish_margin(inst: Instance) -> float:
    """Seconds kept back for reading the answer, re-timing and validating it (grows with the op count)."""
    return 0.1 + 3e-5 * inst.num_ops

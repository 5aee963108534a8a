"""Method ``cpsat``: the exact CP-SAT model of :mod:`.cpsat_model`, warm-started and deterministic.

Steps (the issue's measured recipe for making CP-SAT scale on this problem):
1. a warm start (the best order of the zero-bubble heuristic grid, or ``options.hint``), polished by
   the W-delay local search (:mod:`.polish`);
2. the model with the horizon and ``Z <= incumbent`` from that start, ``Z >=`` the analytic
   bound, every start hinted, presolve off (it expands the memory constraints into huge
   Boolean encodings) and reservoirs never expanded;
3. search with ``interleave_search`` (deterministic whatever ``num_workers``) and a
   *deterministic* time limit, so the same problem gives the same schedule on every run and in
   every process; the wall-clock limit stays as a safety net on a loaded machine;
4. the per-device order of the answer is re-timed exactly by the simulator (:func:`build.compact`,
   or the model's own start times as release dates, whichever is better), then finalized.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ortools.sat.python import cp_model

from .bounds import lower_bound as analytic_lower_bound
from .build import compact, finalize, no_schedule
from .cpsat_model import (
    CpsatModel,
    OpGraph,
    Scaling,
    add_hint,
    add_search_order,
    build,
    needs_memory_resource,
    solved_order,
)
from .exact_times import best_times
from .feasibility import infeasibility_reason
from .instance import Instance, OpId
from .metrics import objective_value
from .polish import polish, trials_for
from .problem import Problem
from .registry import SolveOptions, method
from .schedule import Order, Schedule
from .simulate import DeadlockError
from .strong_bounds import combinatorial_bound

#: Deterministic-time units per wall-clock second we budget (CP-SAT's unit is meant to be close
#: to a second on an unloaded core; on a shared machine it runs slower, so keep margin).
DTIME_PER_SECOND = 0.9
#: The same for models of precedences and no-overlaps only (:attr:`CpsatModel.precedences_only`):
#: there CP-SAT's deterministic clock runs at only 0.13-0.17 units per wall second on an idle
#: machine (``python benchmarks/cpsat_dtime.py``), so 0.9 would never bind and an unproven search
#: would stop on the wall clock, where its answer may not repeat. 0.12 stops it first on an idle or
#: lightly loaded machine, and still leaves the hardest p <= 8 unit-cost proof (0.08 units) room.
PRECEDENCES_DTIME_PER_SECOND = 0.12
#: The same for models with a cumulative or reservoir for memory (:func:`cpsat_model.needs_memory_resource`):
#: on the zero-bubble paper cases, once the search runs, 0.43-0.73 units per wall second with two
#: workers on an idle machine (``python benchmarks/cpsat_dtime.py --only zb --time-limit 60``), after a
#: start of a few seconds at about 0.02 units per second. 0.3 stops a long search on its deterministic
#: limit at about two thirds of its wall time; short searches (a few seconds) still end on the wall.
RESOURCE_DTIME_PER_SECOND = 0.3


@dataclass(frozen=True)
class Incumbent:
    """A valid order with its exact times and objective."""

    order: Order
    start: dict[OpId, float]
    objective: float

    @classmethod
    def of(cls, inst: Instance, order: Order, start: Mapping[OpId, float] | None = None) -> Incumbent:
        times = dict(start) if start is not None else compact(inst, order)
        return cls(order, times, objective_value(inst, times))


@dataclass(frozen=True)
class CpsatResult:
    incumbent: Incumbent
    proven_optimal: bool
    bound: float | None  # valid lower bound in caller units, when the model can prove one


def solver_parameters(solver: cp_model.CpSolver, seconds: float, workers: int, *, presolve: bool = False,
                      dtime: float | None = None, lp: bool = True, precedences_only: bool = False,
                      fixed_search: bool = False) -> None:
    """``dtime`` (deterministic time) is what normally stops the search, so results repeat; callers
    derive it from the nominal budget, never from a measured clock. ``seconds`` is the wall safety net.
    ``lp=False`` turns the linear relaxation off (see :data:`LP_S_PER_OP`).

    ``precedences_only`` (the model is no-overlaps and precedences, :attr:`CpsatModel.precedences_only`):
    no LP (its relaxation adds nothing to the precedence propagation; its first solve cost ~0.7 s at 768
    ops). ``fixed_search`` (makespan on such a model): CP-SAT's fixed search in the model's decision
    order (:func:`cpsat_model.add_search_order`), which proved the memory-tight unit-cost cases several
    times faster than the default search, and no transitive closure of the precedences at load time
    (~0.3 s at 768 ops, same search tree). Both measured worse on stage span, which keeps the defaults."""
    prm = solver.parameters
    if precedences_only:
        lp = False
    if fixed_search:
        prm.transitive_precedences_work_limit = 0
        prm.search_branching = cp_model.FIXED_SEARCH
    if not lp:
        prm.linearization_level = 0
    prm.max_time_in_seconds = max(0.05, seconds)
    prm.max_deterministic_time = max(0.02, dtime if dtime is not None else seconds * DTIME_PER_SECOND)
    prm.num_workers = max(1, workers)
    prm.interleave_search = workers > 1
    prm.random_seed = 1
    prm.cp_model_presolve = presolve
    prm.expand_reservoir_constraints = False
    prm.log_search_progress = False


#: Share of the nominal budget the local search on the warm start may use (:mod:`.polish`).
POLISH_SHARE = 0.1
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


def retime_cost(inst: Instance) -> float:
    """Estimated wall seconds of :func:`retime` (only the exact stage-span timing costs much)."""
    ops = inst.num_ops
    exact = inst.objective == "stage_span" and ops <= EXACT_TIMING_OPS
    return RETIME_S_PER_OP * ops if exact else 5e-5 * ops


def retime(inst: Instance, order: Order) -> Incumbent:
    """Exact times for an order: its optimal timing when affordable, else :func:`build.compact`'s."""
    if inst.num_ops > EXACT_TIMING_OPS:
        return Incumbent.of(inst, order)
    return Incumbent.of(inst, order, best_times(inst, order))


def model_lower(inst: Instance, sc: Scaling, bound: float) -> int:
    """A valid real lower bound ``x`` (caller units) as a model cut ``Z >= c`` with ``c <= ceil(x)``
    when costs are exact (the model's value of the best real schedule is then at least
    ``ceil(OPT * time)``), else ``c = floor(x)``; either keeps the model's own bound valid."""
    x = bound * sc.time
    if sc.time_exact:
        return max(0, int(math.ceil(x - 1e-7 * max(1.0, x))))
    return max(0, int(math.floor(x)))


def horizon_value(inst: Instance, sc: Scaling, objective: float) -> int:
    """Latest time any op needs, in model units, when a schedule of value ``objective`` exists.

    Makespan: that value. Stage span: shrinking every gap between device windows to at most one
    comm keeps a schedule valid and its spans, so some optimum ends by ``p (Z + comm)``.
    """
    if inst.objective == "stage_span":
        return sc.up(inst.devices * (objective + inst.comm)) + inst.devices
    return sc.up(objective) + 1


def solve_model(
    inst: Instance,
    incumbent: Incumbent,
    seconds: float,
    workers: int,
    *,
    graph: OpGraph | None = None,
    extra: Callable[[CpsatModel], None] | None = None,
    known_bound: float | None = None,
    deadline: float | None = None,
    dtime: float | None = None,
    nominal: float | None = None,
) -> CpsatResult:
    """One CP-SAT run from ``incumbent``; never returns anything worse than it.

    ``seconds`` (cut to ``deadline``) is the wall-clock net; ``nominal`` (default ``seconds``) is the
    budget the caller planned, and the only thing the model's set-up decisions (linear relaxation,
    workers) read, so a loaded machine does not change them and the answer stays repeatable.

    ``known_bound`` (a proven lower bound, e.g. from :mod:`.strong_bounds`, at least the combinatorial
    one: it replaces it) becomes the cut ``Z >= c``;
    ``extra`` may add constraints (a neighbourhood), which makes the run's bound meaningless.
    """
    sc = Scaling.of(inst)
    lb = known_bound if known_bound is not None else combinatorial_bound(inst)  # callers pass the best they have
    lower = model_lower(inst, sc, lb)
    upper = sc.up(incumbent.objective) + 1
    cm = build(inst, sc, graph or OpGraph.full(inst, sc), horizon=horizon_value(inst, sc, incumbent.objective),
               lower=lower, upper=upper)
    add_hint(cm, incumbent.start)
    fixed = cm.precedences_only and inst.objective == "makespan"
    if fixed:
        add_search_order(cm)
    overshoot = PRECEDENCES_OVERSHOOT_S if cm.precedences_only else CPSAT_OVERSHOOT_S
    planned = seconds if nominal is None else nominal
    if dtime is not None and cm.precedences_only:
        # the search gets what the plan leaves after loading, re-timing and building, all in wall time
        searching = max(0.0, planned - overshoot - retime_cost(inst) - BUILD_S_PER_OP * inst.num_ops)
        dtime = min(dtime * PRECEDENCES_DTIME_PER_SECOND / DTIME_PER_SECOND, PRECEDENCES_DTIME_PER_SECOND * searching)
    elif dtime is not None and needs_memory_resource(inst, sc):
        dtime *= RESOURCE_DTIME_PER_SECOND / DTIME_PER_SECOND
    if extra is not None:
        extra(cm)
    if deadline is not None:  # building a big model takes real time too, and so do the overshoot and re-timing
        seconds = min(seconds, deadline - time.perf_counter() - overshoot - retime_cost(inst))
    if seconds <= 0.05:
        return CpsatResult(incumbent, False, min(lb, incumbent.objective))
    solver = cp_model.CpSolver()
    lp = planned >= LP_S_PER_OP * inst.num_ops
    solver_parameters(solver, seconds, workers if lp and not cm.precedences_only else 1, dtime=dtime, lp=lp,
                      precedences_only=cm.precedences_only, fixed_search=fixed)
    status = solver.solve(cm.model)
    res = _read(inst, sc, cm, solver, status, incumbent, relaxed=graph is not None or extra is not None)
    if graph is not None:  # a relaxation's incumbent is no schedule of the problem
        return res
    bound = min(max(res.bound or 0.0, lb), res.incumbent.objective)
    return CpsatResult(res.incumbent, res.proven_optimal or bound >= res.incumbent.objective, bound)


def _read(inst: Instance, sc: Scaling, cm: CpsatModel, solver: cp_model.CpSolver, status: int,
          incumbent: Incumbent, *, relaxed: bool) -> CpsatResult:
    bound = None
    if sc.bound_is_valid and not relaxed and status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        bound = sc.bound_to_float(solver.best_objective_bound, inst.objective, inst.devices)
    best = incumbent
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        order = solved_order(cm, solver)
        try:
            cand = retime(inst, order)
        except DeadlockError:
            cand = None
        if cand is not None and cand.objective < best.objective - 1e-9 * max(1.0, best.objective):
            best = cand
    proven = (status == cp_model.OPTIMAL and not relaxed and sc.bound_is_valid and sc.time_exact
              and (inst.objective == "makespan" or sc.span_exact)
              and best.objective <= solver.objective_value / sc.time + 1e-9 * max(1.0, best.objective))
    if bound is not None:
        bound = min(bound, best.objective)
    return CpsatResult(best, proven, bound)


def polished(inst: Instance, inc: Incumbent, seconds: float, deadline: float) -> Incumbent:
    """``inc`` after :func:`polish.polish` with a budget sized for the nominal ``seconds`` (the optimal
    re-timing of an improved order included, when its estimated cost fits half of it)."""
    cost = retime_cost(inst)
    exact = cost <= seconds / 2
    trials = trials_for(inst, seconds - cost if exact else seconds)
    order, times = polish(inst, inc.order, inc.start, max_trials=trials, deadline=deadline)
    value = objective_value(inst, times)
    if value >= inc.objective - 1e-9 * max(1.0, abs(inc.objective)):
        return inc
    found = Incumbent(order, times, value)
    if not exact or time.perf_counter() + cost > deadline:
        return found
    try:
        return min((retime(inst, order), found), key=lambda c: c.objective)
    except DeadlockError:
        return found


def warm_start(inst: Instance, hint: Schedule | None, seconds: float | None = None,
               deadline: float | None = None) -> Incumbent | None:
    """The best of the zero-bubble heuristic grid (sized for the nominal ``seconds``; ``deadline`` is
    the wall safety net) and a caller's hint (if it fits this problem)."""
    from .zb_heuristic import zb_candidates

    cands = [Incumbent(c.order, c.start, c.objective) for c in zb_candidates(inst, seconds, deadline)[:1]]
    if hint is not None and hint.ops:
        with contextlib.suppress(DeadlockError, KeyError, ValueError):
            cands.append(Incumbent.of(inst, [list(ops) for ops in hint.order()]))
    return min(cands, key=lambda c: c.objective) if cands else None


def finish_margin(inst: Instance) -> float:
    """Seconds kept back for reading the answer, re-timing and validating it (grows with the op count)."""
    return 0.1 + 3e-5 * inst.num_ops


def finish(problem: Problem, name: str, inst: Instance, inc: Incumbent, proven: bool, bound: float | None,
           t0: float) -> Schedule:
    return finalize(problem, name, inc.start, status="optimal" if proven else "feasible", lower_bound=bound,
                    solve_time_s=time.perf_counter() - t0, inst=inst)


@method("cpsat", "OR-Tools CP-SAT, exact: proves optimality when it can. Any placement and memory limit.")
def solve_cpsat(problem: Problem, options: SolveOptions) -> Schedule:
    t0 = time.perf_counter()
    inst = Instance.from_problem(problem)
    reason = infeasibility_reason(inst)
    if reason:
        return no_schedule(problem, "cpsat", "infeasible", reason, solve_time_s=time.perf_counter() - t0)
    inc = warm_start(inst, options.hint, 0.25 * options.time_limit_s, t0 + 0.4 * options.time_limit_s)
    if inc is None:
        return no_schedule(problem, "cpsat", "timeout", "no warm start found a valid order",
                           lower_bound=analytic_lower_bound(inst), solve_time_s=time.perf_counter() - t0)
    inc = polished(inst, inc, POLISH_SHARE * options.time_limit_s, t0 + 0.5 * options.time_limit_s)
    deadline = t0 + options.time_limit_s - finish_margin(inst)
    left = deadline - time.perf_counter()
    closed = inc.objective - combinatorial_bound(inst) <= 1e-9 * max(1.0, inc.objective)
    from .auto import FULL_MODEL_OPS

    n_ops = inst.num_ops
    too_big = n_ops > FULL_MODEL_OPS or left <= BUILD_S_PER_OP * n_ops + CPSAT_OVERSHOOT_S + retime_cost(inst) + 0.1
    if closed or too_big:
        res = CpsatResult(inc, closed, combinatorial_bound(inst))
    else:
        res = solve_model(inst, inc, left, options.workers, deadline=deadline, nominal=0.6 * options.time_limit_s,
                          dtime=0.8 * DTIME_PER_SECOND * options.time_limit_s)
    return finish(problem, "cpsat", inst, res.incumbent, res.proven_optimal, res.bound, t0)

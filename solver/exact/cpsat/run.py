"""One CP-SAT run from an incumbent: solver parameters, the deterministic budget, and read-back.

Why apart from the formulation (:mod:`.formulation`): the model says *what* is scheduled; this
module decides how long and how CP-SAT searches it. The search stops on a *deterministic* time
limit (``max_deterministic_time``, rates in :mod:`pipesched.solver.budget`), so the same problem
gives the same schedule in every process; the wall-clock limit is only a safety net. The answer's
per-device order is re-timed exactly (:func:`pipesched.solver.timing.retime.retime`), never read
from the model's integer times.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ortools.sat.python import cp_model

from ...bounds.combinatorial import combinatorial_bound
from ...budget import (
    CPSAT_OVERSHOOT_S,
    DTIME_PER_SECOND,
    LP_S_PER_OP,
    PER_OP,
    PRECEDENCES_DTIME_PER_SECOND,
    PRECEDENCES_OVERSHOOT_S,
    RESOURCE_DTIME_PER_SECOND,
    SETUP_S_PER_PAIR,
    note_wall_cut,
    retime_cost,
    wall_cuts,
)
from ...budget.limit import (
    IDLE_DTIME_PER_SECOND,
    IDLE_PRECEDENCES_DTIME_PER_SECOND,
    IDLE_RESOURCE_DTIME_PER_SECOND,
    WINDOW_DTIME_PER_SECOND,
)
from ...core.errors import InvalidScheduleError
from ...core.instance import Instance, OpId
from ...core.ops import dependency_rank
from ...core.problem import Problem
from ...core.schedule import Schedule
from ...core.step import op_ends, step_tail
from ...core.tolerance import slack
from ...timing.finalize import finalize
from ...timing.retime import Incumbent, retime
from ...timing.simulate import DeadlockError
from .formulation import (
    CpsatModel,
    OpGraph,
    build,
    needs_memory_resource,
    solved_order,
)
from .scaling import Scaling


@dataclass(frozen=True)
class CpsatResult:
    incumbent: Incumbent
    proven_optimal: bool
    bound: float | None  # valid lower bound in caller units, when the model can prove one
    #: What the run is counted (:func:`counted_seconds`): nominal idle-machine wall seconds, from the
    #: deterministic time it used, so the count repeats (0 for a run that did not start).
    counted: float = 0.0


def add_search_order(cm: CpsatModel) -> None:
    """Decision order for a fixed search: ops by ``microbatch + chain rank`` (the time each op would
    start if microbatch ``i`` entered at ``i`` and nothing waited), ties by rank, then by index;
    each start takes its least value. Measured on memory-tight unit costs (p = 8, m = 32, limits 2-4):
    2-5x less deterministic time to prove optimality than the variables' index order."""
    S = cm.inst.num_stages

    def offset(op: OpId) -> int:  # steps from the microbatch's entry if nothing waited: W right after its B
        return dependency_rank(OpId("B", op.stage, op.microbatch), S) + 1 if op.kind == "W" else dependency_rank(op, S)

    ops = sorted(cm.start, key=lambda op: (op.microbatch + offset(op), offset(op)))
    cm.model.add_decision_strategy([cm.start[op] for op in ops], cp_model.CHOOSE_FIRST, cp_model.SELECT_MIN_VALUE)


def add_hint(cm: CpsatModel, start: Mapping[OpId, float]) -> None:
    """Hint every start (floored into model units, which keeps a real schedule feasible), and the step's
    tail the schedule gets (:mod:`pipesched.solver.core.step`)."""
    cm.model.clear_hints()

    def unit(t: float) -> int:
        return max(0, min(cm.horizon, int(math.floor(t * cm.sc.time + 1e-9))))

    for op, x in cm.start.items():
        if op in start:
            cm.model.add_hint(x, unit(start[op]))
    if cm.sync_start and len(start) == len(cm.start):
        tail = step_tail(cm.inst, op_ends(cm.inst, start))
        for _, s, a, _ in tail.syncs:
            cm.model.add_hint(cm.sync_start[s], unit(a))
        for d, a, _ in tail.steps:
            cm.model.add_hint(cm.step_start[d], unit(a))


def solver_parameters(solver: cp_model.CpSolver, seconds: float, workers: int, *, presolve: bool = False,
                      dtime: float | None = None, lp: bool = True, precedences_only: bool = False,
                      fixed_search: bool = False, probing: bool = True) -> None:
    """``dtime`` (deterministic time) is what normally stops the search, so results repeat; callers
    derive it from the nominal budget, never from a measured clock. ``seconds`` is the wall safety net.
    ``lp=False`` turns the linear relaxation off and ``probing=False`` the root probing (see
    :func:`root_setup_cost`). ``PIPESCHED_CPSAT_LOG=1`` in the environment prints CP-SAT's own log
    (where the time goes: docs/development.md).

    ``precedences_only`` (the model is no-overlaps and precedences, :attr:`CpsatModel.precedences_only`):
    no LP (its relaxation adds nothing to the precedence propagation; its first solve cost ~0.7 s at 768
    ops). ``fixed_search`` (makespan on such a model): CP-SAT's fixed search in the model's decision
    order (:func:`.formulation.add_search_order`), which proved the memory-tight unit-cost cases several
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
    if not probing:
        prm.cp_model_probing_level = 0
    prm.max_time_in_seconds = max(0.05, seconds)
    prm.max_deterministic_time = max(0.02, dtime if dtime is not None else seconds * DTIME_PER_SECOND)
    prm.num_workers = max(1, workers)
    prm.interleave_search = workers > 1
    prm.random_seed = 1
    prm.cp_model_presolve = presolve
    prm.expand_reservoir_constraints = False
    prm.log_search_progress = os.environ.get("PIPESCHED_CPSAT_LOG", "") not in ("", "0")


def root_setup_cost(inst: Instance, sc: Scaling) -> float:
    """Wall seconds CP-SAT's root set-up (linear relaxation, probing) may take without looking at the
    clock: per op (:data:`LP_S_PER_OP`), and on models with a memory cumulative per pair of ops on one
    such device (:data:`SETUP_S_PER_PAIR`). A search planned for less runs without them, so a short
    limit on a large capped model is kept (issue 12 target 5)."""
    cost = LP_S_PER_OP * inst.num_ops
    if needs_memory_resource(inst, sc):
        cost = max(cost, SETUP_S_PER_PAIR * device_op_pairs(inst))
    return cost


def device_op_pairs(inst: Instance) -> int:
    """The sum over devices of (ops on the device)^2: what CP-SAT's root set-up on a memory-capped
    model grows with (``python benchmarks/cpsat_setup.py``)."""
    per_microbatch = 3 if inst.split_backward else 2
    return sum((per_microbatch * sum(len(inst.stage_microbatches(s)) for s in stages)) ** 2
               for stages in inst.stages_of_device)


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

    ``known_bound`` (a proven lower bound, e.g. from :mod:`.relaxations`, at least the combinatorial
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
        searching = max(0.0, planned - overshoot - retime_cost(inst) - PER_OP.build * inst.num_ops)
        dtime = min(dtime * PRECEDENCES_DTIME_PER_SECOND / DTIME_PER_SECOND, PRECEDENCES_DTIME_PER_SECOND * searching)
    elif dtime is not None and needs_memory_resource(inst, sc):
        dtime *= RESOURCE_DTIME_PER_SECOND / DTIME_PER_SECOND
    if extra is not None:
        extra(cm)
    if deadline is not None:  # building a big model takes real time too, and so do the overshoot and re-timing
        seconds = min(seconds, deadline - time.perf_counter() - overshoot - retime_cost(inst))
    phase = "CP-SAT search" if graph is None and extra is None else "CP-SAT relaxation"
    if seconds <= 0.05:
        note_wall_cut(phase + " (not started)")
        return CpsatResult(incumbent, False, min(lb, incumbent.objective))
    solver = cp_model.CpSolver()
    lp = planned >= root_setup_cost(inst, sc)
    solver_parameters(solver, seconds, workers if lp and not cm.precedences_only else 1, dtime=dtime, lp=lp,
                      precedences_only=cm.precedences_only, fixed_search=fixed, probing=lp)
    status = solver.solve(cm.model)
    if stopped_by_wall(solver, status):
        note_wall_cut(phase)
    res = _read(inst, sc, cm, solver, status, incumbent, relaxed=graph is not None or extra is not None)
    if graph is not None:  # a relaxation's incumbent is no schedule of the problem
        return res
    # CP-SAT's OPTIMAL may be reached AT the ``Z >= lb`` cut: that proof is then exactly as good as
    # ``lb`` (every bound passed here is brute-force tested: tests/solver/test_cpsat_cut_proofs.py). A
    # schedule found below ``lb`` shows ``lb`` wrong, and capping it would turn that bug into a false
    # "optimal", so it raises, as finalize does for a bound above the objective.
    if lb > res.incumbent.objective + slack(res.incumbent.objective):
        raise InvalidScheduleError(
            f"the lower bound {lb!r} given to CP-SAT as its Z >= cut is above the objective "
            f"{res.incumbent.objective!r} of a schedule the search found: that bound is wrong")
    bound = min(max(res.bound or 0.0, lb), res.incumbent.objective)
    return CpsatResult(res.incumbent, res.proven_optimal, bound, counted_seconds(
        inst, cm, solver.deterministic_time, solver.parameters.num_workers, solver.parameters.linearization_level > 0))


def counted_seconds(inst: Instance, cm: CpsatModel, dtime: float, workers: int, lp: bool = True) -> float:
    """Idle-machine wall seconds a run on ``workers`` threads that used ``dtime`` deterministic units is
    counted: building the model, re-timing the answer, and the search (CP-SAT's load included) at the
    idle rate per CPU second of its kind of model (:mod:`pipesched.solver.budget.limit`) times its
    threads. What ``auto``'s final phase reads to fill its limit (:mod:`pipesched.solver.portfolio.lns`)."""
    if cm.precedences_only:
        rate = IDLE_PRECEDENCES_DTIME_PER_SECOND
    elif not lp:  # one worker without the linear relaxation: the windows' rate
        rate = WINDOW_DTIME_PER_SECOND
    else:
        rate = IDLE_RESOURCE_DTIME_PER_SECOND if needs_memory_resource(inst, cm.sc) else IDLE_DTIME_PER_SECOND
    return PER_OP.build * inst.num_ops + retime_cost(inst) + dtime / (rate * max(1, workers))


def stopped_by_wall(solver: cp_model.CpSolver, status: int) -> bool:
    """Whether the wall-clock limit, not the deterministic one, ended an unproven search (then its
    answer depends on the machine's load: reported, docs/limits.md)."""
    if status in (cp_model.OPTIMAL, cp_model.INFEASIBLE, cp_model.MODEL_INVALID):
        return False
    prm = solver.parameters
    return solver.deterministic_time < 0.99 * prm.max_deterministic_time and solver.wall_time >= 0.99 * prm.max_time_in_seconds


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
        if cand is not None and cand.objective < best.objective - slack(best.objective):
            best = cand
    proven = (status == cp_model.OPTIMAL and not relaxed and sc.bound_is_valid and sc.time_exact
              and (inst.objective == "makespan" or sc.span_exact)
              and best.objective <= solver.objective_value / sc.time + slack(best.objective))
    if bound is not None:
        bound = min(bound, best.objective)
    return CpsatResult(best, proven, bound)


def finish(problem: Problem, name: str, inst: Instance, inc: Incumbent, proven: bool, bound: float | None,
           t0: float, note: str | None = None) -> Schedule:
    """The method's answer, its ``reason`` saying which phases the wall clock cut (if any)."""
    return finalize(problem, name, inc.start, status="optimal" if proven else "feasible", lower_bound=bound,
                    solve_time_s=time.perf_counter() - t0, inst=inst, note=note or cut_note())


def cut_note() -> str | None:
    """The words for :func:`pipesched.solver.budget.wall_cuts`, or None when nothing was cut."""
    cuts = wall_cuts()
    if not cuts:
        return None
    return ("the wall clock, not the deterministic budget, ended: " + ", ".join(cuts)
            + " (on a faster or less loaded machine the answer may differ)")



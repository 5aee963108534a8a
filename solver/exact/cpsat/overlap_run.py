"""``cpsat`` on problems with ``costs.overlap_fb``: warm start, one run of the paired model, read-back.

Why apart from :mod:`.run`: the plain read-back re-times an order one op at a time; here an answer is
an order *and* its pairs, timed by :func:`pipesched.solver.timing.overlap.simulate_paired` (earliest
starts: optimal for a makespan) or, when the model's units are exact, by the model's own times
(optimal for a stage span too). The warm start is the best schedule of the non-exact methods that
apply (``dualpipe`` and ``dualpipe-v`` pair, greedy does not) and of the caller's hint, so the answer
is never worse than any of them. The search stops on a deterministic limit, as :mod:`.run`'s does.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Sequence

from ortools.sat.python import cp_model

from ...bounds.combinatorial import combinatorial_bound
from ...budget import (
    CPSAT_OVERSHOOT_S,
    DTIME_PER_SECOND,
    PAIRED_MAX_OPS,
    PAIRED_WORKERS,
    SEARCH_DTIME_SHARE,
    finish_margin,
    note_wall_cut,
)
from ...core.errors import InvalidScheduleError, NotApplicableError
from ...core.instance import Instance, OpId
from ...core.method import SolveOptions
from ...core.metrics import peak_memory
from ...core.problem import Problem
from ...core.schedule import Schedule
from ...core.tolerance import slack, within_cap
from ...heuristics.catalog import SKIPPED, heuristic_schedules
from ...timing.finalize import TIME_DECIMALS, infeasible, no_schedule
from ...timing.overlap import from_paired_order, paired_schedule
from ...timing.pairs import Pairs, pair_map, timed_pairs
from ...timing.simulate import DeadlockError, simulate
from .overlap import PairedModel, build_paired, candidate_pairs, paired_scaling, paired_solution
from .run import horizon_value, model_lower, solver_parameters, stopped_by_wall

METHOD = "cpsat"


def paired_refusal(problem: Problem) -> str | None:
    """Why the paired model does not take ``problem`` (None when it does)."""
    if problem.num_ops > PAIRED_MAX_OPS:
        return (f"costs.overlap_fb: the exact model with F&B pairs takes at most {PAIRED_MAX_OPS} ops "
                f"(this problem has {problem.num_ops}); use dualpipe, greedy or auto")
    inst = Instance.from_problem(problem)
    if any(x < 0 for x in inst.delta["F"]):
        return ("costs.overlap_fb with a negative memory.forward: the exact model applies a pair's deltas "
                "as the validator does (F's from the start) only when F's delta is >= 0; use dualpipe, greedy or auto")
    return None


def forward_first(order: Sequence[Sequence[OpId]], pairs: Pairs) -> list[list[OpId]]:
    """``order`` with each pair's B straight after its F (a schedule's own order may list B first)."""
    out = []
    for ops in order:
        row = [op for op in ops if not (op.kind == "B" and op in pairs)]
        for b in (op for op in ops if op.kind == "B" and op in pairs):
            row.insert(row.index(pairs[b]) + 1, b)
        out.append(row)
    return out


def paired_warm_start(problem: Problem, inst: Instance, options: SolveOptions) -> Schedule | None:
    """The best schedule (objective, then makespan) of the non-exact methods that apply and of the hint."""
    found = [schedule for _, schedule in heuristic_schedules(problem, options)]
    hint = options.hint
    if hint is not None and hint.ops and {o.id for o in hint.ops} == set(inst.ops()):
        try:
            pairs = timed_pairs(hint.ops, Instance.from_problem(hint.problem))
            found.append(from_paired_order(problem, METHOD, forward_first(hint.order(), pairs), pairs, inst=inst))
        except (*SKIPPED, KeyError):
            pass
    found = [s for s in found if s.ops]
    return min(found, key=lambda s: (s.objective_value, s.makespan)) if found else None


def _hint(cm: PairedModel, schedule: Schedule, inst: Instance) -> None:
    """Hint every variable from a valid schedule (times floored into model units)."""
    pairs = timed_pairs(schedule.ops, inst)
    for o in schedule.ops:
        if o.id in cm.start:
            cm.model.add_hint(cm.start[o.id], min(cm.horizon, int(math.floor(o.start * cm.sc.time + 1e-9))))
            cm.model.add_hint(cm.end_var[o.id], min(cm.horizon, int(math.floor(o.end * cm.sc.time + 1e-9))))
            cm.model.add_hint(cm.alone[o.id], o.id not in pairs)
    for (f, b), z in cm.paired.items():
        cm.model.add_hint(z, pairs.get(f) == b)


def solve_paired(problem: Problem, options: SolveOptions) -> Schedule:
    """Method ``cpsat`` for a problem with ``costs.overlap_fb`` (module docstring)."""
    t0 = time.perf_counter()
    inst = Instance.from_problem(problem)
    if (reason := paired_refusal(problem)) is not None:
        raise NotApplicableError(reason)
    if (answer := infeasible(problem, METHOD, inst, t0)) is not None:
        return answer
    warm = paired_warm_start(problem, inst, options)
    if warm is None:
        return no_schedule(problem, METHOD, "timeout", "no method found a schedule within memory.limit",
                           lower_bound=combinatorial_bound(inst), solve_time_s=time.perf_counter() - t0)
    best = warm.model_copy(update={"method": METHOD})
    lb = combinatorial_bound(inst)
    if best.objective_value - lb <= slack(best.objective_value):
        return best.model_copy(update={"status": "optimal", "lower_bound": best.objective_value,
                                       "solve_time_s": round(time.perf_counter() - t0, 6)})
    deadline = t0 + options.time_limit_s - finish_margin(inst)
    sc = paired_scaling(inst)
    horizon = horizon_value(inst, sc, best.objective_value)
    cm = build_paired(inst, sc, candidate_pairs(inst, sc, horizon), horizon=horizon, lower=model_lower(inst, sc, lb),
                      upper=sc.up(best.objective_value) + 1)
    _hint(cm, best, inst)
    seconds = deadline - time.perf_counter() - CPSAT_OVERSHOOT_S
    if seconds <= 0.05:
        note_wall_cut("CP-SAT search (not started)")
        return best.model_copy(update={"solve_time_s": round(time.perf_counter() - t0, 6)})
    solver = cp_model.CpSolver()
    solver_parameters(solver, seconds, PAIRED_WORKERS,  # not options.workers: budget.PAIRED_WORKERS says why
                      dtime=SEARCH_DTIME_SHARE * DTIME_PER_SECOND * options.time_limit_s)
    status = solver.solve(cm.model)
    if stopped_by_wall(solver, status):
        note_wall_cut("CP-SAT search")
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return best.model_copy(update={"solve_time_s": round(time.perf_counter() - t0, 6)})
    bound = sc.bound_to_float(solver.best_objective_bound, inst.objective, inst.devices) if sc.bound_is_valid else None
    proven = (status == cp_model.OPTIMAL and sc.bound_is_valid and sc.time_exact
              and (inst.objective == "makespan" or sc.span_exact))
    order, chosen, model_start = paired_solution(cm, solver)
    pairs = pair_map(chosen)
    timings = []
    with contextlib.suppress(DeadlockError):  # a model order that deadlocks keeps only the model's times
        timings.append(simulate(inst, order, pairs=pairs))
    if sc.time_exact:
        timings.append({op: x / sc.time for op, x in model_start.items()})
    if not all(within_cap(pk, cap) for pk, cap in zip(peak_memory(inst, order), inst.limit, strict=True)):
        timings = []  # memory scaled inexactly: the model's order may not fit the real cap
    for start in timings:
        try:
            cand = paired_schedule(problem, inst, METHOD, order, pairs, start)
        except InvalidScheduleError:
            continue
        if (cand.objective_value, cand.makespan) < (best.objective_value, best.makespan):
            best = cand
    model_value = solver.objective_value / sc.time
    proven = proven and best.objective_value <= model_value + slack(best.objective_value)
    bound = min(max(bound or 0.0, lb), best.objective_value)
    elapsed = time.perf_counter() - t0
    return best.model_copy(update={
        "status": "optimal" if proven else best.status,
        "lower_bound": round(best.objective_value if proven else max(bound, best.lower_bound or 0.0), TIME_DECIMALS),
        "solve_time_s": round(elapsed, 6)})

"""The one exit of the library: timed ops in, a validated :class:`Schedule` out."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from ..bounds.analytic import lower_bound as analytic_lower_bound
from ..bounds.feasibility import infeasibility_reason
from ..core.errors import InvalidScheduleError, NotApplicableError
from ..core.instance import Instance, OpId
from ..core.metrics import bubble_ratio, makespan, objective_value, peak_memory
from ..core.problem import Problem
from ..core.schedule import Schedule, ScheduledOp, Status, execution_key
from ..core.tolerance import slack, within_cap
from .retime import compact
from .validate import validate

#: Times are rounded to this many decimals so the JSON is stable across platforms and runs.
TIME_DECIMALS = 9


def finalize(
    problem: Problem,
    method: str,
    start: Mapping[OpId, float],
    *,
    status: Status = "feasible",
    lower_bound: float | None = None,
    solve_time_s: float = 0.0,
    inst: Instance | None = None,
) -> Schedule:
    """Wrap timed ops as a :class:`Schedule`, fill in its figures, and validate it.

    ``lower_bound`` from a solver is combined with the analytic bound (the larger wins).
    Raises :class:`InvalidScheduleError` listing every violation if the schedule is wrong.
    """
    inst = inst or Instance.from_problem(problem)
    start = {op: round(t, TIME_DECIMALS) for op, t in start.items()}
    ops = sorted(
        (
            ScheduledOp(
                device=inst.device(op),
                stage=op.stage,
                kind=op.kind,
                microbatch=op.microbatch,
                start=t,
                end=round(t + inst.cost(op), TIME_DECIMALS),
            )
            for op, t in start.items()
        ),
        key=lambda o: (o.device, *execution_key(o)),  # stable: ties keep ``start``'s (execution) order
    )
    objective = objective_value(inst, start)
    bound = analytic_lower_bound(inst)
    if lower_bound is not None:
        bound = max(bound, lower_bound)
    bound = min(bound, objective)
    if status == "feasible" and objective - bound <= slack(objective):
        status = "optimal"  # the bound proves it
    if status == "optimal":
        bound = objective
    schedule = Schedule(
        problem=problem,
        method=method,
        status=status,
        makespan=round(makespan(inst, start), TIME_DECIMALS),
        objective_value=round(objective, TIME_DECIMALS),
        lower_bound=round(bound, TIME_DECIMALS),
        peak_memory=[round(x, TIME_DECIMALS) for x in peak_memory(inst, _order_of(inst, ops))],
        bubble_ratio=round(bubble_ratio(inst, objective), TIME_DECIMALS),
        solve_time_s=round(solve_time_s, 6),
        ops=ops,
    )
    errors = validate(schedule, inst)
    if errors:
        raise InvalidScheduleError(f"method {method!r} produced an invalid schedule: " + "; ".join(errors))
    return schedule


def _order_of(inst: Instance, ops: Sequence[ScheduledOp]) -> list[list[OpId]]:
    order: list[list[OpId]] = [[] for _ in range(inst.devices)]
    for o in ops:  # already sorted by device, then start
        order[o.device].append(o.id)
    return order


def from_order(
    problem: Problem,
    method: str,
    order: Sequence[Sequence[OpId]],
    *,
    solve_time_s: float = 0.0,
    inst: Instance | None = None,
) -> Schedule:
    """Time a per-device order with the simulator and finalize it.

    A fixed recipe cannot adapt to ``memory.limit``: when its order would exceed the cap this
    raises :class:`NotApplicableError` saying by how much, rather than returning a broken schedule.
    """
    inst = inst or Instance.from_problem(problem)
    for d, (peak, cap) in enumerate(zip(peak_memory(inst, order), inst.limit, strict=True)):
        if not within_cap(peak, cap):
            raise NotApplicableError(
                f"{method} needs {peak:g} activation memory on device {d}, above memory.limit {cap:g}; "
                "methods that respect the limit: greedy, cpsat, ilp, auto"
            )
    return finalize(problem, method, compact(inst, order), solve_time_s=solve_time_s, inst=inst)


def no_schedule(problem: Problem, method: str, status: Status, reason: str, *, lower_bound: float | None = None,
                solve_time_s: float = 0.0) -> Schedule:
    """An infeasible or timed-out answer: no ops, and a reason in words."""
    return Schedule(problem=problem, method=method, status=status, reason=reason, lower_bound=lower_bound,
                    solve_time_s=round(solve_time_s, 6))


def infeasible(problem: Problem, method: str, inst: Instance, t0: float) -> Schedule | None:
    """The ``infeasible`` answer when :func:`pipesched.solver.bounds.feasibility.infeasibility_reason`
    proves that no schedule fits the memory limit (the one check every exact method asks), else None."""
    reason = infeasibility_reason(inst)
    if reason is None:
        return None
    return no_schedule(problem, method, "infeasible", reason, solve_time_s=time.perf_counter() - t0)

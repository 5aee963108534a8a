"""The one exit of the library: timed ops in, a validated :class:`Schedule` out."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..bounds.combinatorial import combinatorial_bound
from ..bounds.feasibility import infeasibility_reason
from ..core.errors import InvalidScheduleError, NotApplicableError
from ..core.instance import Instance, OpId
from ..core.method import SolveOptions
from ..core.metrics import bubble_ratio, makespan, objective_value, peak_memory
from ..core.problem import Problem
from ..core.schedule import Schedule, ScheduledOp, Status, TimedStep, TimedSync, execution_key
from ..core.step import step_tail
from ..core.tolerance import slack, within_cap
from ..core.transients import reserves_transients
from .retime import Incumbent, compact
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
    note: str | None = None,
) -> Schedule:
    """Wrap timed ops as a :class:`Schedule`, fill in its figures, and validate it.

    ``note`` goes to the schedule's ``reason``: on a schedule with ops it says why the answer may not
    be the method's full search (the wall clock cut a phase, or the limit was below the set-up cost;
    docs/limits.md).

    Why the status is decided here, and how (issue 16 item 2): ``optimal`` must rest on something
    the search did not produce. Two sources count: ``status="optimal"`` from the caller, which an
    exact method passes only on its solver's proof (CP-SAT OPTIMAL on the exact model, ILP optimal),
    and the closed-form bounds (:func:`~pipesched.solver.bounds.combinatorial.combinatorial_bound`:
    analytic, relay, round trip, energy) computed here from the problem alone. A ``lower_bound``
    handed in (a solver's best bound, a relaxation's) is reported but upgrades nothing, and one
    above the achieved objective is a bug in its producer, so it raises instead of being capped.
    Which source proved a status stays internal (see :func:`status_source`); the wire model does
    not carry it.
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
    if lower_bound is not None and lower_bound > objective + slack(objective):
        raise InvalidScheduleError(
            f"method {method!r} handed a lower_bound {lower_bound!r} above the objective {objective!r} "
            "its own schedule achieves: that bound is wrong"
        )
    if inst.transient and inst.cap:  # solved under limits that keep the transients back: no proof of
        status, lower_bound = ("feasible" if status == "optimal" else status), None  # the problem itself
    closed_form = combinatorial_bound(inst.relaxed())  # checked against the objective once it validates
    bound = max(closed_form, lower_bound if lower_bound is not None else closed_form)
    status = status_source(status, objective, closed_form)[0]
    bound = objective if status == "optimal" else min(bound, objective)  # equal up to slack(objective)
    schedule = Schedule(
        problem=problem,
        method=method,
        status=status,
        makespan=round(makespan(inst, start), TIME_DECIMALS),
        objective_value=round(objective, TIME_DECIMALS),
        lower_bound=round(bound, TIME_DECIMALS),
        peak_memory=[round(x, TIME_DECIMALS) for x in peak_memory(inst, _order_of(inst, ops), transients=True)],
        bubble_ratio=round(bubble_ratio(inst, objective), TIME_DECIMALS),
        solve_time_s=round(solve_time_s, 6),
        ops=ops,
        reason=note,
        **tail_fields(inst, ops),
    )
    errors = validate(schedule, inst)
    if errors:
        raise InvalidScheduleError(f"method {method!r} produced an invalid schedule: " + "; ".join(errors))
    if closed_form > objective + slack(objective):  # a valid schedule beats a bound: the bound is wrong
        raise InvalidScheduleError(
            f"method {method!r}: the closed-form bound {closed_form!r} is above the objective {objective!r} "
            "of a valid schedule: the bound is wrong"
        )
    return schedule


def tail_fields(inst: Instance, ops: Sequence[ScheduledOp]) -> dict[str, Any]:
    """The schedule's step-tail fields (:mod:`pipesched.solver.core.step`) from its timed ops: none
    without a tail, so those schedules read as before."""
    if not inst.tail:
        return {}
    tail = step_tail(inst, ((o.id, o.end) for o in ops))
    r = TIME_DECIMALS
    return {
        "pipeline_end": round(max((o.end for o in ops), default=0.0), r),
        "step_end": round(tail.end, r),
        "syncs": [TimedSync(device=d, stage=s, start=round(a, r), end=round(b, r)) for d, s, a, b in tail.syncs],
        "optimizer_steps": [TimedStep(device=d, start=round(a, r), end=round(b, r)) for d, a, b in tail.steps],
    }


def status_source(status: Status, objective: float, closed_form: float) -> tuple[Status, str | None]:
    """The honest status and what proved it: ``"solver-proof"`` when the caller passed ``optimal``
    (only exact methods do, on their solver's proof), ``"closed-form"`` when the combinatorial bound
    meets ``objective``, else the caller's status and None."""
    if status == "optimal":
        return status, "solver-proof"
    if status == "feasible" and objective - closed_form <= slack(objective):
        return "optimal", "closed-form"
    return status, None


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
    if status == "infeasible" and reserves_transients(problem):
        status, reason = "timeout", f"{reason} (under limits that keep each device's largest recompute " \
            "transient back, so not proven for the problem itself)"
    return Schedule(problem=problem, method=method, status=status, reason=reason, lower_bound=lower_bound,
                    solve_time_s=round(solve_time_s, 6))


def infeasible(problem: Problem, method: str, inst: Instance, t0: float) -> Schedule | None:
    """The ``infeasible`` answer when :func:`pipesched.solver.bounds.feasibility.infeasibility_reason`
    proves that no schedule fits the memory limit (the one check every exact method asks), else None."""
    reason = infeasibility_reason(inst)
    if reason is None:
        return None
    return no_schedule(problem, method, "infeasible", reason, solve_time_s=time.perf_counter() - t0)


def finalize_best(problem: Problem, name: str, inst: Instance, cands: Sequence[Incumbent], t0: float,
                  instead: str = "greedy or auto") -> Schedule:
    """A search method's answer: the first (best) of ``cands`` finalized, or why there is none."""
    if not cands:
        raise NotApplicableError(f"{name} found no order within memory.limit; try {instead}")
    return finalize(problem, name, cands[0].start, solve_time_s=time.perf_counter() - t0, inst=inst)


def best_candidate_solver(name: str, candidates: Callable[[Instance], Sequence[Incumbent]],
                          instead: str = "greedy or auto") -> Callable[[Problem, SolveOptions], Schedule]:
    """The ``run`` of a search method whose answer is the best of its ``candidates`` (:func:`finalize_best`)."""
    def solve(problem: Problem, options: SolveOptions) -> Schedule:
        t0 = time.perf_counter()
        inst = Instance.from_problem(problem)
        return finalize_best(problem, name, inst, candidates(inst), t0, instead)
    return solve

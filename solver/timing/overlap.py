"""Overlapped F&B pairs (``costs.overlap_fb``, DualPipe's overlapped forward-backward chunks).

Why a module apart: only problems that set ``costs.overlap_fb`` have pairs; this one turns a paired
order into a validated schedule (the simulator times it, :mod:`.pairs` holds the pair data).

A pair is one F and one B on the same device (different microbatches or stages) that run as one op:
both start together, once the device is free and *both* halves' inputs have arrived, and both end
``Instance.pair_cost(F, B)`` later. Memory applies both: F's (positive) delta is held from the start,
B's released at the end. In a schedule a pair is two ordinary :class:`ScheduledOp` records with equal
device, start and end (no new field on the wire): :func:`timed_pairs` finds them again, and in an order
the pair's two ops stand next to each other, F first; :func:`pipesched.solver.timing.simulate.simulate`
times such an order with its ``pairs`` option.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from ..bounds.combinatorial import combinatorial_bound
from ..core.errors import InvalidScheduleError, NotApplicableError
from ..core.instance import Instance, OpId
from ..core.metrics import peak_memory
from ..core.problem import Problem
from ..core.schedule import Schedule, ScheduledOp, Status
from ..core.tolerance import slack, within_cap
from .figures import ops_makespan, ops_objective
from .finalize import TIME_DECIMALS, status_source, tail_fields
from .pairs import Pairs, busy_time, duration, pair_map, timed_pairs
from .simulate import simulate
from .validate import validate

__all__ = ["Pairs", "busy_time", "from_paired_order", "pair_map", "paired_schedule", "timed_pairs"]

def from_paired_order(problem: Problem, method: str, order: Sequence[Sequence[OpId]], pairs: Pairs, *,
                      inst: Instance | None = None, status: Status = "feasible", solve_time_s: float = 0.0) -> Schedule:
    """:func:`pipesched.solver.timing.finalize.from_order` for an order with F&B pairs: times it with
    :func:`simulate_paired`, refuses it over the memory cap, fills the figures from the ops and validates."""
    t0 = time.perf_counter()
    inst = inst or Instance.from_problem(problem)
    order = [list(ops) for ops in order]
    for d, (peak, cap) in enumerate(zip(peak_memory(inst, order), inst.limit, strict=True)):
        if not within_cap(peak, cap):
            raise NotApplicableError(
                f"{method} needs {peak:g} activation memory on device {d}, above memory.limit {cap:g}; "
                "methods that respect the limit: greedy, auto")
    start = simulate(inst, order, pairs=pairs)
    return paired_schedule(problem, inst, method, order, pairs, start, status=status,
                           solve_time_s=solve_time_s or time.perf_counter() - t0)


def paired_schedule(problem: Problem, inst: Instance, method: str, order: Sequence[Sequence[OpId]], pairs: Pairs,
                    start: Mapping[OpId, float], *, status: Status = "feasible", lower_bound: float | None = None,
                    solve_time_s: float = 0.0) -> Schedule:
    """Timed ops with pairs (each device's ops in ``order``'s sequence: a pair's F before its B, so
    memory is walked right) as a validated :class:`Schedule`, the figures filled from the ops; a
    solver's ``lower_bound`` is kept when above the closed form. Raises :class:`InvalidScheduleError`
    when it is not valid or the closed-form bound is above its objective."""
    ops = []
    for d, dev_ops in enumerate(order):
        for op in dev_ops:
            t = round(start[op], TIME_DECIMALS)
            ops.append(ScheduledOp(device=d, stage=op.stage, kind=op.kind, microbatch=op.microbatch, start=t,
                                   end=round(t + duration(inst, op, pairs), TIME_DECIMALS)))
    tail = tail_fields(inst, ops)
    ends = [x.end for x in tail["optimizer_steps"]] if tail else []
    objective = ops_objective(ops, inst.devices, inst.objective, ends)
    closed_form = combinatorial_bound(inst)
    status = status_source(status, objective, closed_form)[0]
    bound = objective if status == "optimal" else min(max(closed_form, lower_bound or 0.0), objective)
    busy = busy_time(ops, pairs)
    schedule = Schedule(
        problem=problem, method=method, status=status,
        makespan=round(max(ops_makespan(ops), max(ends, default=0.0)), TIME_DECIMALS),
        objective_value=round(objective, TIME_DECIMALS),
        lower_bound=round(bound, TIME_DECIMALS),
        peak_memory=[round(x, TIME_DECIMALS) for x in peak_memory(inst, order, transients=True)],
        bubble_ratio=round(1.0 - busy / (inst.devices * objective) if objective > 0 else 0.0, TIME_DECIMALS),
        solve_time_s=round(solve_time_s, 6), ops=ops, **tail,
    )
    errors = validate(schedule, inst)
    if errors:
        raise InvalidScheduleError(f"method {method!r} produced an invalid schedule: " + "; ".join(errors))
    if closed_form > objective + slack(objective):
        raise InvalidScheduleError(f"method {method!r}: the closed-form bound {closed_form!r} is above the "
                                   f"objective {objective!r} of a valid schedule: the bound is wrong")
    return schedule

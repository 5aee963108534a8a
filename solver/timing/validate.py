"""The validator every schedule passes before it leaves the library.

It re-checks each rule of the problem from scratch (op set, durations, devices, dependencies
with comm, no overlap, memory cap, the step's tail: :mod:`.validate_step`) plus the schedule's own
reported figures, and reports every
violation in words rather than stopping at the first.
"""

from __future__ import annotations

from ..core.instance import Instance, OpId
from ..core.schedule import Schedule
from ..core.tolerance import WIRE_REL_TOL
from .figures import ops_bubble, ops_makespan, ops_objective, ops_peaks
from .pairs import busy_time, duration, timed_pairs
from .validate_step import step_errors


def _close(a: float, b: float, scale: float) -> bool:
    return abs(a - b) <= WIRE_REL_TOL * max(1.0, scale)


def validate(schedule: Schedule, inst: Instance | None = None, *, limit: int = 50) -> list[str]:
    """All violations of ``schedule`` against its problem (empty when valid)."""
    inst = inst or Instance.from_problem(schedule.problem)
    errors: list[str] = []
    if schedule.status in ("infeasible", "timeout"):
        if schedule.ops:
            errors.append(f"a schedule with status {schedule.status!r} must carry no ops")
        if not schedule.reason:
            errors.append(f"a schedule with status {schedule.status!r} must give a reason")
        return errors

    scale = max((o.end for o in schedule.ops), default=1.0)
    start: dict[OpId, float] = {}
    pairs = timed_pairs(schedule.ops, inst)  # overlapped F&B pairs (costs.overlap_fb), else empty
    kinds, S, m = set(inst.kinds), inst.num_stages, inst.microbatches
    home, durations, dual = inst.device_of_stage, inst.duration, inst.dual
    early = -WIRE_REL_TOL * scale
    tol = WIRE_REL_TOL * max(1.0, scale)  # :func:`_close` at this scale, hoisted out of the op loop
    for o in schedule.ops:
        kind, s, i = o.kind, o.stage, o.microbatch
        op = OpId(kind, s, i)
        if kind not in kinds:
            errors.append(f"{op}: kind {op.kind} does not exist when split_backward is {inst.split_backward}")
            continue
        if not (0 <= s < S and 0 <= i < m):
            errors.append(f"{op}: stage or microbatch out of range")
            continue
        if dual and not inst.has_op(op):  # dual placement: the microbatch flows through the other copy
            lo, hi = inst.copy_range(op.stage)
            errors.append(f"{op}: microbatch {op.microbatch} does not run stage {op.stage} (dual placement: "
                          f"stages {lo}..{hi} run microbatches {inst.stage_microbatches(op.stage)})")
            continue
        if op in start:
            errors.append(f"{op} is scheduled more than once")
            continue
        start[op] = t = o.start
        if o.device != home[s]:
            errors.append(f"{op} runs on device {o.device} but stage {op.stage} lives on device {inst.device(op)}")
        if t < early:
            errors.append(f"{op} starts at {o.start:g}, before time 0")
        lasts = duration(inst, op, pairs) if pairs else durations[kind][s]
        if abs(o.end - t - lasts) > tol:
            errors.append(f"{op} lasts {o.end - o.start:g} but costs {lasts:g}")
    # every op kept above is one of the problem's, once: as many as it has means none is missing
    missing = [] if len(start) == inst.num_ops else [op for op in inst.ops() if op not in start]
    if missing:
        shown = ", ".join(str(op) for op in missing[:5])
        errors.append(f"{len(missing)} ops are missing: {shown}{' ...' if len(missing) > 5 else ''}")
        return errors[:limit]
    if any(not 0 <= o.device < inst.devices for o in schedule.ops):
        return errors[:limit]  # already reported; per-device checks need real devices

    tol = WIRE_REL_TOL * max(1.0, scale)
    cost = inst.cost if not pairs else (lambda op: duration(inst, op, pairs))
    for op, t in start.items():
        for pred, lag in inst.predecessors(op):
            ready = start[pred] + cost(pred) + lag
            if t < ready - tol:
                errors.append(f"{op} starts at {t:g} but {pred} ends at {ready - lag:g} (+comm {lag:g})")

    order = schedule.order()
    if pairs:  # a pair's F first, so its forward's memory is taken before its backward's is released
        order = [_forward_first(ops, pairs) for ops in order]
    for d, ops in enumerate(order):
        for a, b in zip(ops, ops[1:], strict=False):
            if pairs and pairs.get(a) == b:
                continue  # the two halves of one overlapped op
            a_end = start[a] + cost(a)
            if start[b] < a_end - tol:
                errors.append(f"device {d}: {b} starts at {start[b]:g} while {a} runs until {a_end:g}")

    peaks = ops_peaks(order, inst)
    for d, (peak, cap) in enumerate(zip(peaks, map(inst.memory_cap, range(inst.devices)), strict=True)):
        if peak > cap + WIRE_REL_TOL * max(1.0, abs(cap)):
            errors.append(f"device {d}: activation memory peaks at {peak:g}, above its limit {cap:g}")

    tail_errors, step_end, ends = step_errors(schedule, inst, tol)
    errors += tail_errors
    ops = schedule.ops  # figures from the ops' own times (figures.py), never core/metrics.py which filled them
    figures = {
        "makespan": ops_makespan(ops) if step_end is None else max(ops_makespan(ops), step_end),
        "objective_value": ops_objective(ops, inst.devices, inst.objective, ends),
    }
    for name, value in figures.items():
        reported = getattr(schedule, name)
        if reported is None or not _close(reported, value, scale):
            errors.append(f"reported {name} {reported} but the ops give {value:g}")
    # a peak is a running sum of deltas: its rounding error scales with the deltas, not with the peak
    mem_scale = max([1.0] + [abs(x) for k in inst.kinds for x in inst.delta[k]])
    if len(schedule.peak_memory) != inst.devices or not all(
        _close(a, b, max(mem_scale, abs(b))) for a, b in zip(schedule.peak_memory, peaks, strict=False)
    ):
        errors.append(f"reported peak_memory {schedule.peak_memory} but the ops give {peaks}")
    expected_bubble = ops_bubble(ops, inst.devices, figures["objective_value"])
    if pairs and figures["objective_value"] > 0:  # a pair's device time counts once: idle time, as DualPipe counts
        expected_bubble = 1.0 - busy_time(ops, pairs) / (inst.devices * figures["objective_value"])
    if schedule.bubble_ratio is None or abs(schedule.bubble_ratio - expected_bubble) > 1e-6:
        errors.append(f"reported bubble_ratio {schedule.bubble_ratio} but the ops give {expected_bubble:.6g}")
    if schedule.lower_bound is not None and schedule.lower_bound > figures["objective_value"] + WIRE_REL_TOL * scale:
        errors.append(f"lower_bound {schedule.lower_bound:g} is above the objective {figures['objective_value']:g}")
    if schedule.status == "optimal" and schedule.lower_bound is not None and not _close(
        schedule.lower_bound, figures["objective_value"], scale
    ):
        errors.append("status 'optimal' but lower_bound differs from the objective")
    return errors[:limit]


def _forward_first(ops: list[OpId], pairs: dict[OpId, OpId]) -> list[OpId]:
    """``ops`` with each pair's B moved after its F (a hand-written file may list them either way)."""
    out = list(ops)
    for k in range(len(out) - 1):
        if out[k].kind == "B" and pairs.get(out[k]) == out[k + 1]:
            out[k], out[k + 1] = out[k + 1], out[k]
    return out

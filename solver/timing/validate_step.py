"""The validator's check of a step's tail (``costs.grad_sync``, ``costs.optimizer``), from the schedule's
own records: it never calls :mod:`pipesched.solver.core.step`, which wrote them, so a mistake there shows.

A tail is valid when every stage has one sync of its cost on its own device, starting no earlier than the
stage's last W (B with a fused backward) ends; a device's syncs do not overlap; every device has one
optimizer step of its cost, starting no earlier than its ops and syncs end. Any valid tail is accepted
(the library reports the earliest one); the figures must then agree with it.
"""

from __future__ import annotations

from ..core.instance import Instance
from ..core.schedule import Schedule


def step_errors(schedule: Schedule, inst: Instance, tol: float) -> tuple[list[str], float | None, list[float]]:
    """(violations, the step's end, each device's end) from the schedule's tail records; the end is None
    when the problem has no tail (then the records must be absent)."""
    fields = ("pipeline_end", "step_end", "syncs", "optimizer_steps")
    if not inst.tail:
        present = [f for f in fields if getattr(schedule, f) is not None]
        return ([f"{', '.join(present)} given but the problem sets no grad_sync or optimizer"] if present else []), \
            None, []
    missing = [f for f in fields if getattr(schedule, f) is None]
    if missing:
        return [f"the problem sets grad_sync or optimizer but the schedule gives no {', '.join(missing)}"], None, []
    errors: list[str] = []
    kind = "W" if inst.split_backward else "B"
    ready = [0.0] * inst.num_stages
    last = [0.0] * inst.devices
    for o in schedule.ops:
        if 0 <= o.device < inst.devices:
            last[o.device] = max(last[o.device], o.end)
        if o.kind == kind and 0 <= o.stage < inst.num_stages:
            ready[o.stage] = max(ready[o.stage], o.end)
    syncs = schedule.syncs or []
    seen: dict[int, int] = {}
    lanes: list[list[tuple[float, float, int]]] = [[] for _ in range(inst.devices)]
    for x in syncs:
        if not 0 <= x.stage < inst.num_stages or x.device != inst.device_of_stage[x.stage]:
            errors.append(f"sync of stage {x.stage} on device {x.device}: no such stage on that device")
            continue
        seen[x.stage] = seen.get(x.stage, 0) + 1
        if abs(x.end - x.start - inst.sync[x.stage]) > tol:
            errors.append(f"sync of stage {x.stage} lasts {x.end - x.start:g} but costs {inst.sync[x.stage]:g}")
        if x.start < ready[x.stage] - tol:
            errors.append(f"sync of stage {x.stage} starts at {x.start:g} before its last {kind} ends "
                          f"at {ready[x.stage]:g}")
        lanes[x.device].append((x.start, x.end, x.stage))
        last[x.device] = max(last[x.device], x.end)
    wrong = [s for s in range(inst.num_stages) if seen.get(s) != 1]
    if wrong:
        errors.append(f"stages {wrong[:5]} need exactly one sync each")
    for d, lane in enumerate(lanes):
        lane.sort()
        for (_, a_end, a), (b_start, _, b) in zip(lane, lane[1:], strict=False):
            if b_start < a_end - tol:
                errors.append(f"device {d}: sync of stage {b} starts at {b_start:g} while stage {a}'s runs until {a_end:g}")
    ends = [0.0] * inst.devices
    counted = [0] * inst.devices
    for x in schedule.optimizer_steps or []:
        if not 0 <= x.device < inst.devices:
            errors.append(f"optimizer step on device {x.device}: no such device")
            continue
        counted[x.device] += 1
        if abs(x.end - x.start - inst.optimizer[x.device]) > tol:
            errors.append(f"device {x.device}: optimizer step lasts {x.end - x.start:g} but costs "
                          f"{inst.optimizer[x.device]:g}")
        if x.start < last[x.device] - tol:
            errors.append(f"device {x.device}: optimizer step starts at {x.start:g} before its ops and syncs end "
                          f"at {last[x.device]:g}")
        ends[x.device] = x.end
    if counted != [1] * inst.devices:
        errors.append("every device needs exactly one optimizer step")
    step_end = max(ends, default=0.0)
    pipeline_end = max((o.end for o in schedule.ops), default=0.0)
    for name, value in (("pipeline_end", pipeline_end), ("step_end", step_end)):
        if abs((getattr(schedule, name) or 0.0) - value) > tol:
            errors.append(f"reported {name} {getattr(schedule, name)} but the ops and tail give {value:g}")
    return errors, step_end, ends

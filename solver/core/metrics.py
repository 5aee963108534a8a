"""Figures of a timed schedule: makespan (the step's end), per-device span, objective, peak memory, bubble."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .instance import Instance, OpId
from .step import op_ends, step_tail


def device_spans(inst: Instance, start: Mapping[OpId, float]) -> list[float]:
    """Last end minus first start on each device (0 for a device with no ops); with a step tail
    (:mod:`.step`) a device's span ends at its optimizer step's end."""
    first = [float("inf")] * inst.devices
    last = [float("-inf")] * inst.devices
    for op, t in start.items():
        d = inst.device(op)
        first[d] = min(first[d], t)
        last[d] = max(last[d], t + inst.cost(op))
    if inst.tail:
        last = [max(a, b) for a, b in zip(last, step_tail(inst, op_ends(inst, start)).device_ends(), strict=True)]
    return [max(0.0, b - a) if a != float("inf") else 0.0 for a, b in zip(first, last, strict=True)]


def pipeline_end(inst: Instance, start: Mapping[OpId, float]) -> float:
    """When the last op ends."""
    return max((t + inst.cost(op) for op, t in start.items()), default=0.0)


def makespan(inst: Instance, start: Mapping[OpId, float]) -> float:
    """When the step ends: the last op, or with a step tail the last optimizer step (:mod:`.step`)."""
    end = pipeline_end(inst, start)
    return max(end, step_tail(inst, op_ends(inst, start)).end) if inst.tail else end


def objective_value(inst: Instance, start: Mapping[OpId, float]) -> float:
    """``makespan``, or ``stage_span`` = the largest per-device span (zero-bubble paper)."""
    if inst.objective == "stage_span":
        return max(device_spans(inst, start), default=0.0)
    return makespan(inst, start)


def peak_memory(inst: Instance, order: Sequence[Sequence[OpId]], *, transients: bool = False) -> list[float]:
    """Highest live activation memory on each device for ops run in ``order``.

    Ops on a device never overlap, so memory follows the order alone: a positive delta is
    held from the op's start, a negative one is released at its end. With ``transients`` a B's
    transient (:meth:`Instance.surge`) is live while it runs: the figure a schedule reports and the
    validator checks against the problem's limit; without, the level methods keep under
    ``Instance.limit`` (which holds the transients back, :mod:`.transients`).
    """
    peaks = []
    for ops in order:
        live = peak = 0.0
        for op in ops:
            delta, surge = inst.mem(op), (inst.surge(op) if transients else 0.0)
            if delta > 0 or surge > 0:
                peak = max(peak, live + max(delta, 0.0) + surge)
            live += delta
        peaks.append(peak)
    return peaks


def bubble_ratio(inst: Instance, objective: float) -> float:
    """Idle share of the objective window over all devices: ``1 - work / (p * objective)``."""
    if objective <= 0:
        return 0.0
    return 1.0 - inst.total_work() / (inst.devices * objective)

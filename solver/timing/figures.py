"""The validator's own arithmetic for a schedule's reported figures (issue 16 item 7).

Why a second copy: :mod:`pipesched.solver.core.metrics` fills the figures, so a validator that
called it would agree with any mistake there. These functions read only the ops' own ``start``,
``end`` and ``device`` (and the problem's memory deltas), never the metrics code, so the two paths meet only in the test that compares them.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate

from ..core.instance import Instance, OpId
from ..core.schedule import ScheduledOp


def ops_makespan(ops: Sequence[ScheduledOp]) -> float:
    """Last end over all ops (0 with no ops)."""
    return max((o.end for o in ops), default=0.0)


def ops_spans(ops: Sequence[ScheduledOp], devices: int, ends: Sequence[float] = ()) -> list[float]:
    """Per device: last end minus first start (0 for an idle device); ``ends``: each device's step end
    (its optimizer step's), when the step has a tail."""
    inf = float("inf")
    lo, hi = [inf] * devices, [-inf] * devices
    for o in ops:
        d, a, b = o.device, o.start, o.end
        if a < lo[d]:
            lo[d] = a
        if b > hi[d]:
            hi[d] = b
    for d, e in enumerate(ends):
        hi[d] = max(hi[d], e)
    return [hi[d] - lo[d] if lo[d] != inf else 0.0 for d in range(devices)]


def ops_objective(ops: Sequence[ScheduledOp], devices: int, objective: str, ends: Sequence[float] = ()) -> float:
    """``makespan`` (the step's end: ``ends`` are the devices' step ends when the step has a tail), or the
    largest per-device span for ``stage_span``."""
    if objective == "stage_span":
        return max(ops_spans(ops, devices, ends), default=0.0)
    return max(ops_makespan(ops), max(ends, default=0.0))


def ops_peaks(order: Sequence[Sequence[OpId]], inst: Instance) -> list[float]:
    """Per device, the highest live memory walking ``order`` (the schedule's own by start, then end).

    A positive delta is held from the op's start, a negative one released at its end; ops on a
    device never overlap (checked separately), so the running level after each acquisition is a
    candidate peak, and the level starts at 0.
    """
    peaks = []
    for ops in order:
        levels = list(accumulate((inst.mem(op) for op in ops), initial=0.0))
        taken = [lvl + max(inst.mem(op), 0.0) + inst.surge(op) for lvl, op in zip(levels, ops, strict=False)
                 if inst.mem(op) > 0 or inst.surge(op) > 0]  # a B's transient is live while it runs
        peaks.append(max(taken, default=0.0))
    return peaks


def ops_bubble(ops: Sequence[ScheduledOp], devices: int, objective: float) -> float:
    """Idle share of ``devices x objective``, with the work summed from the ops' own durations."""
    if objective <= 0:
        return 0.0
    return 1.0 - sum(o.end - o.start for o in ops) / (devices * objective)

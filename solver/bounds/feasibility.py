"""Fast infeasibility detection: decide, without searching, that no schedule fits the memory limit.

When every stage's memory levels are non-negative (``dF >= 0`` and ``dF + dB >= 0``: a microbatch
never holds negative memory), every other microbatch adds a non-negative amount at any moment, so
a device needs at least the peak that microbatch 0 alone reaches on it: forwards of the device's
stages in model order, then backwards from the top, each W right after its B (running W later
only holds memory longer). That peak is also sufficient: running the microbatches one after
another reaches exactly it. So in that case the check below is exact, not a heuristic.
"""

from __future__ import annotations

from ..core.instance import Instance, OpId
from ..core.metrics import peak_memory
from ..core.tolerance import within_cap


def _natural(inst: Instance) -> bool:
    for s in range(inst.num_stages):
        l1 = inst.delta["F"][s]
        l2 = l1 + inst.delta["B"][s] if inst.split_backward else 0.0
        if l1 < 0 or l2 < 0:
            return False
    return True


def single_microbatch_peak(inst: Instance) -> list[float]:
    """Peak memory on each device when one microbatch runs alone (under the dual placement, the larger
    of one downward and one upward microbatch alone: each visits one stage per device)."""
    peaks = [0.0] * inst.devices
    for i in sorted({inst.stage_microbatches(s)[0] for s in range(inst.num_stages) if inst.stage_microbatches(s)}):
        order: list[list[OpId]] = []
        for stages in inst.stages_of_device:
            mine = [s for s in stages if inst.has_op(OpId("F", s, i))]
            ops = [OpId("F", s, i) for s in mine]
            for s in reversed(mine):
                ops.append(OpId("B", s, i))
                if inst.split_backward:
                    ops.append(OpId("W", s, i))
            order.append(ops)
        peaks = [max(a, b) for a, b in zip(peaks, peak_memory(inst, order), strict=True)]
    return peaks


def infeasibility_reason(inst: Instance) -> str | None:
    """Why no schedule can respect ``memory.limit`` (None when one can, or when we cannot tell fast)."""
    if not _natural(inst):
        return None
    for d, (need, cap) in enumerate(zip(single_microbatch_peak(inst), inst.limit, strict=True)):
        if not within_cap(need, cap):
            stages = ", ".join(str(s) for s in inst.stages_of_device[d])
            return (f"memory.limit {cap:g} on device {d} is below the {need:g} that a single microbatch's "
                    f"activations need there (stages {stages}); no schedule can make progress. "
                    f"Raise the limit to at least {need:g}.")
    return None

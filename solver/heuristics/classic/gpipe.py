"""GPipe (Huang et al., 2019): every forward of the step, then every backward.

Peak activations are m microbatches per stage; per-device span (m + p - 1)(F + B + W) with
uniform costs and no comm.
"""

from __future__ import annotations

from ...core.instance import Instance, OpId
from ...core.schedule import Order
from ._common import recipe


def gpipe_order(inst: Instance) -> Order:
    order: Order = []
    for stages in inst.stages_of_device:
        ops = [OpId("F", s, i) for s in stages for i in inst.stage_microbatches(s)]
        for s in reversed(stages):
            for i in inst.stage_microbatches(s):
                ops.append(OpId("B", s, i))
                if inst.split_backward:
                    ops.append(OpId("W", s, i))
        order.append(ops)
    return order


GPIPE = recipe("gpipe", "GPipe: all forwards, then all backwards (W right after B). Any placement.", gpipe_order)

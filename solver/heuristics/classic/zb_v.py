"""ZB-V (Qi et al., "Pipeline Parallelism with Controllable Memory", NeurIPS 2024): V placement,
two chunks per device, split backward.

Device ``r`` holds chunk 0 = stage ``r`` and chunk 1 = stage ``2p - 1 - r``, so a microbatch runs
down the devices and back up, and the last chunk's backward starts on the device that ran its
forward. Per device, in the paper's phases:

1. warm-up: ``2(p - r) - 1`` chunk-0 forwards;
2. ``r`` pairs (chunk-1 forward, chunk-0 forward);
3. ``p - r`` triples (chunk-1 F, B, W);
4. steady: chunk-0 F (while any remain), B, W, then chunk-1 F, B, W, until every forward ran;
5. cool-down: ``r`` pairs (chunk-0 B, chunk-1 B), ``p - r`` pairs (chunk-0 B, W), then the Ws left.

Each device holds about ``2p`` chunk activations, i.e. 1F1B's peak for the whole model, and with
``F = B = W`` the bubble is nearly zero. The phases need ``m >= 2p``; for fewer microbatches the
order is built for ``2p`` and trimmed (:func:`keep_microbatches`).
"""

from __future__ import annotations

from ...core.instance import Instance, OpId
from ...core.problem import Problem
from ...core.schedule import Order
from ._common import keep_microbatches, needs_split_backward, needs_v_placement, recipe


def _applies(problem: Problem) -> str | None:
    return needs_v_placement("zb-v", problem) or needs_split_backward("zb-v", problem)


class _Device:
    """Counters of one device's two chunks while its op list is written out."""

    def __init__(self, chunk0: int, chunk1: int) -> None:
        self.stage = (chunk0, chunk1)
        self.count = {(k, c): 0 for k in "FBW" for c in (0, 1)}
        self.ops: list[OpId] = []

    def emit(self, kind: str, chunk: int) -> None:
        i = self.count[kind, chunk]
        self.ops.append(OpId(kind, self.stage[chunk], i))  # type: ignore[arg-type]
        self.count[kind, chunk] = i + 1


def zb_v_order(inst: Instance) -> Order:
    p, m = inst.devices, inst.microbatches
    total = max(m, 2 * p)
    order: Order = []
    for r in range(p):
        dev = _Device(r, 2 * p - 1 - r)
        # Phase 1 (warm-up): nF0, n = 2(p - r) - 1
        for _ in range(2 * (p - r) - 1):
            dev.emit("F", 0)
        # Phase 2: nF1F0, n = r
        for _ in range(r):
            dev.emit("F", 1)
            dev.emit("F", 0)
        # Phase 3: nF1B1W1, n = p - r (chunk 1 has now run p forwards)
        for _ in range(p - r):
            for kind in "FBW":
                dev.emit(kind, 1)
        # Phase 4 (steady): n x (F0 while any remain) B0W0F1B1W1, n = max(m, 2p) - p
        while dev.count["F", 1] < total:
            if dev.count["F", 0] < total:
                dev.emit("F", 0)
            for chunk in (0, 1):
                if chunk == 1:
                    dev.emit("F", 1)
                dev.emit("B", chunk)
                dev.emit("W", chunk)
        # Phase 5 (cool-down): nB0B1, n = r; then nB0W0, n = p - r; then every W left
        for _ in range(r):
            dev.emit("B", 0)
            dev.emit("B", 1)
        for _ in range(p - r):
            dev.emit("B", 0)
            dev.emit("W", 0)
        for chunk in (0, 1):
            while dev.count["W", chunk] < total:
                dev.emit("W", chunk)
        order.append(dev.ops)
    return keep_microbatches(order, m)


ZB_V = recipe(
    "zb-v",
    "ZB-V (Qi et al. 2024): V-shaped two-chunk schedule, 1F1B's peak memory, near-zero bubble "
    "when F=B=W; needs placement 'v' (stages_per_device = 2) and split_backward.",
    zb_v_order,
    _applies,
)

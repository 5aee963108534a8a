"""DualPipe-V (DeepSeek-AI's DualPipe, "cut in half" onto a V placement; DeepSeek-V3 report, 2024).

Device ``r`` holds chunk 0 = stage ``r`` and chunk 1 = stage ``2p - 1 - r``. DualPipe's point is
to overlap one chunk's forward with the other chunk's backward (and their communication); a
device here runs one op at a time, so each overlapped pair becomes "forward, then backward".
The eight steps, with their counts on device ``r``:

1. ``2(p - r - 1)`` chunk-0 forwards;
2. ``r + 1`` pairs: chunk-0 F, chunk-1 F;
3. ``p - r - 1`` triples: chunk-1 B, its W, chunk-1 F (zero-bubble split);
4. main, ``m - 2p + r + 1`` times: chunk-0 F with chunk-1 B, then chunk-1 F with chunk-0 B;
5. ``p - r - 1`` times: chunk-1 B, then chunk-1 F with chunk-0 B;
6. ``r + 1`` pairs: chunk-1 B, chunk-0 B; from half way on (earlier on odd devices) Ws are
   deferred to a queue instead of following their B;
7. ``p - r - 1`` pairs: a queued W, chunk-0 B (its W queued);
8. the queued Ws.

Outside the deferred steps each backward is followed by its W (the fused backward of the original).
With ``costs.overlap_fb`` the "with" pairs of steps 4 and 5 run as one overlapped op each
(:mod:`pipesched.solver.timing.overlap`), as in the original; without it, F then B.
The steps need ``m >= 2p``; for fewer microbatches the order is built for ``2p`` and trimmed.
"""

from __future__ import annotations

from ...core.instance import Instance, OpId
from ...core.problem import Problem
from ...core.schedule import Order
from ._common import keep_microbatches, needs_v_placement
from .dualpipe_steps import Steps, cool_down, paired_method, warm_up


def _applies(problem: Problem) -> str | None:
    return needs_v_placement("dualpipe-v", problem)


def dualpipe_v_order(inst: Instance) -> Order:
    return dualpipe_v_plan(inst)[0]


def dualpipe_v_plan(inst: Instance) -> tuple[Order, list[tuple[OpId, OpId]]]:
    """The eight steps and the F&B pairs of steps 4 and 5 (pairs with a trimmed half dropped)."""
    p, m = inst.devices, inst.microbatches
    total = max(m, 2 * p)
    order: Order = []
    pairs: list[tuple[OpId, OpId]] = []
    for r in range(p):
        dev = Steps((r, 2 * p - 1 - r), (0, 0), inst.split_backward)
        warm_up(dev, p - r - 1, r)  # steps 1-3: n = p - r - 1 (2n F0, r + 1 F0F1, n B1W1F1)
        # Step 4 (main): nF0B1F1B0, n = m - 2p + r + 1
        for _ in range(total - 2 * p + r + 1):
            dev.overlapped(0, 1)
            dev.overlapped(1, 0)
        cool_down(dev, p - r - 1, r)  # steps 5-8
        order.append(dev.ops)
        pairs += dev.pairs
    return keep_microbatches(order, m), [(f, b) for f, b in pairs if f.microbatch < m and b.microbatch < m]


DUALPIPE_V = paired_method(
    "dualpipe-v",
    "DualPipe-V (DeepSeek): V placement, one chunk's F paired with the other chunk's B (one op with "
    "costs.overlap_fb), Ws deferred at the tail; needs placement 'v' (stages_per_device = 2).",
    dualpipe_v_plan, _applies,
)

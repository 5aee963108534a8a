"""DualPipe (DeepSeek-AI, DeepSeek-V3 technical report, 2024): two streams from both ends, dual placement.

Under ``placement: "dual"`` device ``r`` holds stage ``r`` of the downward copy and stage ``p - 1 - r``
of the upward one; microbatches ``0..h-1`` enter at device 0, the others at device ``p - 1``. Each
device calls "chunk 0" the copy whose stream starts on its own end of the pipeline (the downward
copy for ``r < p/2``, the upward copy otherwise) and "chunk 1" the other. With ``H = p/2``,
``j = min(r, p - 1 - r)`` (the reference's ``half_rank``) and ``C`` microbatches per direction, the
eight steps of the reference implementation's ``step()``, with its names and counts:

1. ``nF0``, ``2(H - j - 1)``: chunk-0 forwards (warm-up);
2. ``nF0F1``, ``j + 1``: a chunk-0 forward, then a chunk-1 forward;
3. ``nB1W1F1``, ``H - j - 1``: chunk-1 B, its W at once (zero bubble), a chunk-1 forward;
4. ``nF0B1F1B0`` (main), ``C - p + j + 1``: F0 overlapped with B1, then F1 overlapped with B0
   (the middle ranks, ``j = H - 1``, run the first F0 and B1 apart);
5. ``nB1F1B0``, ``H - j - 1``: chunk-1 B, then F1 overlapped with B0;
6. ``nB1B0``, ``j + 1``: a chunk-1 B and a chunk-0 B; from the loop's middle on (one B earlier on
   odd ``j``) the Ws are deferred to a queue (zero bubble);
7. ``nWB0``, ``H - j - 1``: a queued W, then a chunk-0 B whose W is queued;
8. ``nW``: the queued Ws.

Outside the deferred steps a backward is the full backward (B, then its W at once). An overlapped
pair is one combined op when the problem sets ``costs.overlap_fb`` (:mod:`pipesched.solver.timing.overlap`:
both halves start together and last the pair's duration, the W after it), and F then B otherwise
(one op at a time per device, as ``dualpipe-v`` does). The
steps need ``C >= p`` in each direction (``m >= 2p`` with the default split); for fewer, or an
uneven ``dual_split``, the order is built for ``max(p, h, m - h)`` microbatches per direction and
each direction is trimmed to its own count (:func:`keep_microbatches`' argument, per direction).
"""

from __future__ import annotations

from ...core.instance import Instance, OpId
from ...core.problem import Problem
from ...core.schedule import Order
from .dualpipe_steps import Steps, cool_down, paired_method, warm_up


def _applies(problem: Problem) -> str | None:
    if problem.placement != "dual":
        return (f"dualpipe needs placement 'dual' (stages_per_device = 2, devices even; got {problem.placement!r}); "
                "for the V placement use dualpipe-v")
    return None


def _rank(inst: Instance, r: int) -> Steps:
    """Device ``r``'s writer: chunk 0 is the copy whose stream starts on its own end."""
    p = inst.devices
    down, up = r, 2 * p - 1 - r  # stage ids of the two copies on this device
    if r < p // 2:
        return Steps((down, up), (0, inst.split), inst.split_backward)
    return Steps((up, down), (inst.split, 0), inst.split_backward)


def dualpipe_order(inst: Instance) -> Order:
    """The eight steps on every device as one op at a time (module docstring)."""
    return dualpipe_plan(inst)[0]


def dualpipe_plan(inst: Instance) -> tuple[Order, list[tuple[OpId, OpId]]]:
    """The eight steps on every device and the overlapped F&B pairs they name, each direction trimmed
    to its count (a pair with a trimmed half is dropped)."""
    p, m, h = inst.devices, inst.microbatches, inst.split
    half = p // 2
    chunks = max(p, h, m - h)  # microbatches per direction the steps are built for
    order: Order = []
    pairs: list[tuple[OpId, OpId]] = []
    for r in range(p):
        dev = _rank(inst, r)
        j = min(r, p - 1 - r)
        warm_up(dev, half - j - 1, j)  # steps 1-3
        # Step 4 (main): nF0B1F1B0; F0 & B1, then F1 & B0 (the middle ranks' first F0, B1 not overlapped)
        for i in range(chunks - p + j + 1):
            if i == 0 and j == half - 1:
                dev.forward(0)
                dev.backward(1)
            else:
                dev.overlapped(0, 1)
            dev.overlapped(1, 0)
        cool_down(dev, half - j - 1, j)  # steps 5-8
        order.append(dev.ops)
        pairs += dev.pairs
    kept = [(f, b) for f, b in pairs if inst.has_op(f) and inst.has_op(b)]
    return [[op for op in ops if inst.has_op(op)] for ops in order], kept


DUALPIPE = paired_method(
    "dualpipe",
    "DualPipe (DeepSeek-V3): placement 'dual', two streams from both ends, one chunk's F overlapped with the "
    "other's B (one op with costs.overlap_fb), Ws deferred at the tail; built for m >= 2p, trimmed below.",
    dualpipe_plan, _applies,
)

"""Interleaved 1F1B (Narayanan et al., SC'21, "Efficient large-scale language model training on
GPU clusters using Megatron-LM"): loop placement, ``v >= 2`` model chunks per device.

Microbatches go through in groups of ``p``. Device ``d`` runs forwards group by group, and within
a group chunk by chunk (chunk ``c`` is stage ``c p + d``); backwards walk the chunks in reverse.
It starts with ``2(p - 1 - d) + (v - 1) p`` warm-up forwards, then alternates one forward and one
backward (W right after its B when split), then drains. With uniform per-stage costs f, b and no
comm, ``m`` a multiple of ``p`` and a fused backward, every device spans
``m v (f + b) + (p - 1)(f + b)``: the 1F1B bubble ``(p - 1)(F + B)`` of whole-device costs
``F = v f`` shrinks ``v`` times.

Megatron requires ``m % p == 0``; here any ``m`` is accepted: the order is built for ``m`` rounded
up to a multiple of ``p`` and the padding microbatches are dropped (see
:func:`keep_microbatches`), which keeps it deadlock-free at the cost of a small extra bubble.

Depth/breadth knob (Llama 3's "microbatches per round"): :func:`interleaved_order` takes
``per_round`` = ``g`` with ``p <= g <= m`` in place of the group size ``p``; the warm-up becomes
``2(p - 1 - d) + (v - 1) g``. ``g = p`` is the depth-first order above; ``g = m`` is breadth-first:
every microbatch through a chunk before the next chunk (``looped-bfs``'s forward order), with 1F1B
only on the last chunk, so it holds fewer activations than ``looped-bfs``. A larger ``g`` holds more
activations per device and, on a real network, gives each chunk's sends longer to hide.
"""

from __future__ import annotations

from ...core.instance import Instance, OpId
from ...core.problem import Problem
from ...core.schedule import Order
from ._common import backward, keep_microbatches, recipe


def _applies(problem: Problem) -> str | None:
    if problem.placement != "loop" or problem.stages_per_device < 2:
        return (
            "interleaved-1f1b needs placement 'loop' with stages_per_device >= 2 "
            f"(got {problem.placement!r}, {problem.stages_per_device}); use 1f1b for v = 1"
        )
    return None


def interleaved_order(inst: Instance, per_round: int | None = None) -> Order:
    """Per device: warm-up forwards, then one forward and one backward, then the drain; microbatches
    in rounds of ``per_round`` (default ``p``, depth-first; ``m`` is breadth-first: module docstring)."""
    p, v, m = inst.devices, inst.stages_per_device, inst.microbatches
    g = p if per_round is None else per_round
    if not p <= g <= max(p, m):
        raise ValueError(f"per_round must be in [p, m] = [{p}, {max(p, m)}] (got {g}): fewer than p per round "
                         "leaves a chunk's first device waiting for the previous chunk")
    padded = -(-m // g) * g
    order: Order = []
    for d in range(p):
        chunks = inst.stages_of_device[d]  # chunk c is stage c * p + d
        forwards: list[OpId] = []
        backwards: list[list[OpId]] = []
        for first in range(0, padded, g):
            group = range(first, first + g)
            forwards += [OpId("F", s, i) for s in chunks for i in group]
            backwards += [backward(s, i, inst.split_backward) for s in reversed(chunks) for i in group]
        warmup = min(len(forwards), 2 * (p - 1 - d) + (v - 1) * g)
        ops = forwards[:warmup]
        for k, f in enumerate(forwards[warmup:]):
            ops.append(f)
            ops += backwards[k]
        for b in backwards[len(forwards) - warmup :]:
            ops += b
        order.append(ops)
    return keep_microbatches(order, m)


INTERLEAVED_1F1B = recipe(
    "interleaved-1f1b",
    "Interleaved 1F1B (Megatron-LM): v chunks per device in microbatch groups of p, bubble "
    "shrinks v times; needs placement 'loop' with stages_per_device >= 2; any m.",
    interleaved_order,
    _applies,
)

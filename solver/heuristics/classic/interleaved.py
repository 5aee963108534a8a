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


def interleaved_order(inst: Instance) -> Order:
    p, v, m = inst.devices, inst.stages_per_device, inst.microbatches
    padded = -(-m // p) * p
    order: Order = []
    for d in range(p):
        chunks = inst.stages_of_device[d]  # chunk c is stage c * p + d
        forwards: list[OpId] = []
        backwards: list[list[OpId]] = []
        for first in range(0, padded, p):
            group = range(first, first + p)
            forwards += [OpId("F", s, i) for s in chunks for i in group]
            backwards += [backward(s, i, inst.split_backward) for s in reversed(chunks) for i in group]
        warmup = min(len(forwards), 2 * (p - 1 - d) + (v - 1) * p)
        ops = forwards[:warmup]
        for k, f in enumerate(forwards[warmup:]):
            ops.append(f)
            ops += backwards[k]
        for b in backwards[len(forwards) - warmup :]:
            ops += b
        order.append(ops)
    return keep_microbatches(order, m)


solve_interleaved = recipe(
    "interleaved-1f1b",
    "Interleaved 1F1B (Megatron-LM): v chunks per device in microbatch groups of p, bubble "
    "shrinks v times; needs placement 'loop' with stages_per_device >= 2; any m.",
    interleaved_order,
    _applies,
)

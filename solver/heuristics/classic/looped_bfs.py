"""Looped BFS (Lamy-Poirier, 2022, "Breadth-First Pipeline Parallelism", arXiv:2211.05953):
loop placement, ``v >= 2`` chunks per device, breadth-first: every microbatch goes through a
chunk before any microbatch enters the next chunk.

Device ``d`` holds stages ``d, p + d, ..., (v - 1)p + d`` (chunk ``c`` is stage ``c p + d``). It
runs two phases, the same per-rank compute order as torch 2.13's ``ScheduleLoopedBFS``:

1. forwards, chunk by chunk ascending, microbatches ``0 .. m-1`` in each: ``v m`` ops;
2. backwards, chunk by chunk descending, microbatches ``m-1 .. 0`` in each (the last microbatch
   to finish its forward is the first whose loss gradient exists): ``v m`` ops, W right after
   its B when the backward is split.

Closed form (uniform per-stage costs f, b, w, comm 0, ``m >= p``, no memory cap binding): the
forward wave never waits (device 0 needs chunk ``c - 1``'s last stage for microbatch ``i`` at
``(c-1)m + p + i`` forward slots, and its own slot is ``c m + i``, later when ``m >= p``), so the
last forward ends at ``(v m + p - 1) f``; the backward wave mirrors it with the B chain moving
one ``b`` per hop and each device busy ``b + w`` per microbatch (the same wait argument needs
``p b <= m (b + w)``, true for ``m >= p``). Hence

    makespan = (v m + p - 1) f + (p - 1) b + v m (b + w),

which is ``(v m + p - 1)(f + b + w)`` for a fused backward (one op of cost b + w). The price is
memory: every device holds all ``v m`` microbatch activations at the turn, as GPipe does.
"""

from __future__ import annotations

from ...core.instance import Instance, OpId
from ...core.problem import Problem
from ...core.schedule import Order
from ._common import backward, recipe


def _applies(problem: Problem) -> str | None:
    if problem.placement != "loop" or problem.stages_per_device < 2:
        return (
            "looped-bfs needs placement 'loop' with stages_per_device >= 2 "
            f"(got {problem.placement!r}, {problem.stages_per_device}); use gpipe for v = 1"
        )
    return None


def looped_bfs_order(inst: Instance) -> Order:
    """Per device: phase 1 (v m forwards, breadth-first), then phase 2 (v m backwards, reversed)."""
    m, split = inst.microbatches, inst.split_backward
    order: Order = []
    for chunks in inst.stages_of_device:  # chunk c is stage c * p + d, ascending
        ops: list[OpId] = []
        # Phase 1: forwards, v * m ops: chunk by chunk, every microbatch through it.
        for stage in chunks:
            ops += [OpId("F", stage, i) for i in range(m)]
        # Phase 2: backwards, v * m ops (x2 with W): chunks reversed, last microbatch first.
        for stage in reversed(chunks):
            for i in reversed(range(m)):
                ops += backward(stage, i, split)
        order.append(ops)
    return order


LOOPED_BFS = recipe(
    "looped-bfs",
    "Looped BFS (breadth-first interleaving, torch's ScheduleLoopedBFS): every microbatch through a "
    "chunk before the next; needs placement 'loop' with stages_per_device >= 2; any m.",
    looped_bfs_order,
    _applies,
)

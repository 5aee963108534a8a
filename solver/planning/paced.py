"""The paced split: the balanced DP under an in-flight estimate from Little's law, not 1F1B's.

The rules of :mod:`.split` size memory as 1F1B fills it: stage ``s`` holds ``S − s`` microbatches
between F and B. Under a tight cap that overstates the early stages and understates the late ones.
By Little's law a stage whose microbatches each stay in flight at least their round trip ``R_s``
(from its F starting to its B ending: the forwards and backwards of the layers from the stage's first
on, and the crossings there and back) holds on average ``m · R_s / T`` microbatches at a step ``T``.
So this rule takes ``k_s = min(m, ceil(m · R_s / T) + 1)`` (the average, and one more for the phase:
the next F starts before the oldest B returns) with ``T`` the plan's lower bound over all splits (a
step can only be longer, so the average only smaller), and runs :func:`.split.balanced` with it; the
round trips depend on where the stages start, so the estimate and the split are iterated together
(from the 1F1B estimate's split) until the split repeats, at most :data:`ROUNDS` times.

Why: on ``benchmarks/plan.py``'s 70B, V = 128k, p = 8 tight case the 1F1B estimate wants the first
stages' full recompute and lets a late stage take 12 blocks, whose memory then holds too few Ws back
(its held-W bound alone is 3041.8 ms); with ``T`` = 2748.5 the estimate asks ``k`` = 6, 6, 5, 5, 4, 3,
3, 2, which keeps every stage from the fourth on at 10 blocks or fewer and the last two at 11, the
first recomputing (``auto`` schedules that split at 2950.0 with 3 of the first stage's 9 blocks
recomputed, at 5 s). This is an estimate, as 1F1B's is: the solver works under the exact limit.
"""

from __future__ import annotations

import math
from dataclasses import replace

from .induce import Split, crossings_before
from .model import ExpandedLayer
from .split import SplitContext, balanced

#: Most rounds of estimate-then-split (the split usually repeats after one or two).
ROUNDS = 4


def round_trips(layers: list[ExpandedLayer], ctx: SplitContext, bounds: tuple[int, ...]) -> list[float]:
    """``R_s`` of each stage of ``bounds``: the forward and backward (``B``, plus ``W`` when fused) of
    every layer from the stage's first on, and the link both ways over each later device boundary."""
    t, n, cluster = ctx.table, ctx.table.n, ctx.cluster
    c = min(cluster.link.time(x.output) for x in layers[:-1]) if n > 1 else 0.0
    x = crossings_before(cluster)
    fused = not cluster.split_backward

    def back(i: int) -> float:
        return t.backward_input(i, n) + (t.backward_weight(i, n) if fused else 0.0)

    return [t.forward(bounds[s], n) + back(bounds[s]) + 2 * (x[-1] - x[s]) * c for s in range(ctx.S)]


def inflight(layers: list[ExpandedLayer], ctx: SplitContext, bounds: tuple[int, ...], step: float) -> tuple[int, ...]:
    """``k_s = min(m, ceil(m · R_s / step) + 1)`` (module docstring)."""
    m = ctx.microbatches
    return tuple(min(m, math.ceil(m * r / step * (1 - 1e-12)) + 1) for r in round_trips(layers, ctx, bounds))


def paced(layers: list[ExpandedLayer], ctx: SplitContext, step: float) -> tuple[Split | None, SplitContext]:
    """The balanced split under the paced estimate for a step of at least ``step``, and the context
    holding that estimate (for :func:`.partial.thinned`); None without a memory cap or a step."""
    if ctx.cluster.memory_per_device is None or not step > 0 or not math.isfinite(step):
        return None, ctx
    start = balanced(ctx) or balanced(SplitContext.of(layers, ctx.cluster.model_copy(
        update={"memory_per_device": None}), ctx.microbatches))
    if start is None:
        return None, ctx
    bounds, found, paced_ctx = start.bounds, None, ctx
    for _ in range(ROUNDS):
        paced_ctx = replace(ctx, inflight=inflight(layers, ctx, bounds, step))
        found = balanced(paced_ctx)
        if found is None or found.bounds == bounds:
            break
        bounds = found.bounds
    return found, paced_ctx

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

Why: on ``benchmarks/plan.py``'s 70B, V = 128k, p = 8 tight case the 1F1B estimate's balanced split
gives the seventh stage 12 blocks, whose memory then holds too few Ws back (that split's held-W bound
alone is 3041.8 ms); with ``T`` = 2748.5 this one asks ``k`` = 6, 6, 5, 5, 4, 3, 3, 2 and gets 9, 9,
10, 10, 10, 11, 11, 10 blocks (the embedding on the first stage, the head on the last) with 4 of the
first stage's blocks recomputed, which ``auto`` schedules at 2952.4 ms in 5 s. An estimate, as 1F1B's
is: the solver works under the exact limit.
"""

from __future__ import annotations

import math
from dataclasses import replace

from .induce import Split, crossings_before
from .model import ExpandedLayer
from .partial import counts_of, with_counts
from .split import SplitContext, _le, balanced
from .sums import stage_sums

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


def _demand(layers: list[ExpandedLayer], ctx: SplitContext, split: Split, d: int) -> float:
    """Device ``d``'s estimate: each stage's static and ``k_s`` microbatches between F and B, and on top
    the largest of its stages' B (positive delta and transient) with one more microbatch held between
    B and W (split backward)."""
    b, mine = split.bounds, [s for s in range(ctx.S) if ctx.device[s] == d]
    sums = {s: stage_sums(layers, b[s], b[s + 1], split.recompute[s], split.count(s)) for s in mine}
    held_w = 0.0 if not ctx.cluster.split_backward else 1.0
    return math.fsum(x.static + ctx.k[s] * max(0.0, x.d_forward) for s, x in sums.items()) + max(
        max(0.0, x.d_backward_input) + x.transient + held_w * max(0.0, x.d_forward + x.d_backward_input)
        for x in sums.values())


def fewest_recomputed(layers: list[ExpandedLayer], ctx: SplitContext, split: Split) -> Split:
    """``split`` with each recomputed stage cut to the fewest layers (:func:`.sums.recompute_order`)
    under which :func:`_demand` fits its device, by bisection, the device's stages in order. Why the one
    W: a stage that cannot keep a W back must run each W right after its B, and the schedules that beat
    1F1B fill their gaps with deferred Ws (70B p = 8 tight: 4 of the first stage's 9 blocks, where the
    estimate without it asks 2; ``auto`` gives 2952.4 and 3024.9 for them at 5 s, 2984.2 for all 9)."""
    counts = counts_of(ctx, split)
    for d in range(ctx.cluster.devices):
        for s in (s for s in range(ctx.S) if ctx.device[s] == d and counts[s] > 0):
            lo, hi = 0, counts[s]
            while lo < hi:
                mid = (lo + hi) // 2
                trial = counts.copy()
                trial[s] = mid
                if _le(_demand(layers, ctx, with_counts(ctx, split.bounds, trial), d), ctx.cluster.memory(d)):
                    hi = mid
                else:
                    lo = mid + 1
            counts[s] = hi
    return with_counts(ctx, split.bounds, counts)


def paced(layers: list[ExpandedLayer], ctx: SplitContext, step: float) -> tuple[Split | None, SplitContext]:
    """The balanced split under the paced estimate for a step of at least ``step``, its recompute cut
    to per-layer counts (:func:`fewest_recomputed`), and the context holding that estimate; None
    without a memory cap or a step."""
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
    return (fewest_recomputed(layers, paced_ctx, found) if found is not None else None), paced_ctx

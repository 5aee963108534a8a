"""Per-layer recompute: a stage checkpoints only as many of its layers as its device's memory needs.

Whole-stage recompute is the rules' granularity (and the AdaPipe-style baseline's); it overpays when a
device is only a little over its memory: recomputing all ten blocks of a stage to save the memory of
three adds the forward time of ten to every B. A *partial* split recomputes ``count`` layers of a stage,
taken in :func:`.sums.recompute_order` (the most memory saved per forward time first), so the choice
per stage is one number, and for identical blocks every subset of that size is the same stage.

- :func:`thinned`: a split's recomputed stages cut to the fewest layers the memory estimate of
  :mod:`.split` (1F1B in-flight counts) needs, device by device.
- :func:`count_moves`: the planner's local moves on counts (the estimate is an estimate; the schedule
  on the exact limit says whether one layer more or fewer pays).
"""

from __future__ import annotations

import math

from .induce import Split
from .split import SplitContext, _le
from .sums import recompute_order, stage_sums


def _recomputable(ctx: SplitContext, split: Split, s: int) -> int:
    b = split.bounds
    return len(recompute_order(ctx.table.layers, b[s], b[s + 1]))


def counts_of(ctx: SplitContext, split: Split) -> list[int]:
    """Layers each stage recomputes (0 when it does not)."""
    return [0 if not split.recompute[s] else c if (c := split.count(s)) is not None
            else _recomputable(ctx, split, s) for s in range(ctx.S)]


def with_counts(ctx: SplitContext, bounds: tuple[int, ...], counts: list[int]) -> Split:
    """The split recomputing ``counts[s]`` layers of stage ``s`` (all of them: whole-stage recompute)."""
    full = [len(recompute_order(ctx.table.layers, bounds[s], bounds[s + 1])) for s in range(ctx.S)]
    return Split.of(bounds, [c > 0 for c in counts],
                    [None if c >= f else c for c, f in zip(counts, full, strict=True)])


def device_demand(ctx: SplitContext, split: Split, d: int) -> float:
    """The memory estimate of :meth:`SplitContext.device_demand` with per-layer recompute counts."""
    b, layers = split.bounds, ctx.table.layers
    mine = [s for s in range(ctx.S) if ctx.device[s] == d]
    sums = {s: stage_sums(layers, b[s], b[s + 1], split.recompute[s], split.count(s)) for s in mine}
    return (math.fsum(x.static + ctx.k[s] * x.held for s, x in sums.items())
            + max(x.transient + max(0.0, x.d_backward_input) for x in sums.values()))


def thinned(ctx: SplitContext, split: Split | None) -> Split | None:
    """``split`` with each recomputed stage cut to the fewest layers its device's estimate needs (the
    device's stages in order, each by bisection on its count), or None when nothing could be cut."""
    if split is None or not any(split.recompute):
        return None
    counts = counts_of(ctx, split)
    for d in range(ctx.cluster.devices):
        memory = ctx.cluster.memory(d)
        for s in (s for s in range(ctx.S) if ctx.device[s] == d and counts[s] > 0):
            lo, hi = 0, counts[s]  # hi fits (the split as given, or a count already cut)
            while lo < hi:
                mid = (lo + hi) // 2
                trial = counts.copy()
                trial[s] = mid
                if _le(device_demand(ctx, with_counts(ctx, split.bounds, trial), d), memory):
                    hi = mid
                else:
                    lo = mid + 1
            counts[s] = hi
    out = with_counts(ctx, split.bounds, counts)
    return out if out != split else None


def count_moves(ctx: SplitContext, split: Split, full_devices: set[int]) -> list[Split]:
    """One layer fewer, and half as many, on each recomputing stage; on the stages of a device whose
    memory peak sits at its limit, one layer more, and half its recomputable layers."""
    counts, out = counts_of(ctx, split), []
    for s in range(ctx.S):
        top = _recomputable(ctx, split, s)
        options = {counts[s] - 1, counts[s] // 2} if counts[s] > 0 else set()
        if ctx.device[s] in full_devices and counts[s] < top:
            options |= {counts[s] + 1, (counts[s] + top + 1) // 2}
        for c in sorted(x for x in options if 0 <= x <= top and x != counts[s]):
            moved = counts.copy()
            moved[s] = c
            out.append(with_counts(ctx, split.bounds, moved))
    return out

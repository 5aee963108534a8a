"""The planner's candidate splits of a model, for callers that price splits their own way (e.g. from
profiles of whole stages: :mod:`pipesched.runtime.profiling.profiled_split`)."""

from __future__ import annotations

from .bound import window_split
from .model import Cluster, Model
from .planner import plan
from .split import (
    SplitContext,
    adapipe,
    balanced,
    chunk_balanced,
    device_balanced,
    megatron,
    torchtitan,
    uniform,
)

#: A split as its stages' ``[first, last)`` layer ranges.
SplitRanges = list[tuple[int, int]]


def candidate_splits(model: Model, cluster: Cluster, microbatches: int, plan_time_limit_s: float = 0.0
                   ) -> list[SplitRanges]:
    """The planner's candidate splits (memory aside: the runtime replays without a cap): its rule
    splits (balanced, AdaPipe-style, uniform, torchtitan, Megatron, window; chunk- and device-balanced
    for v >= 2), the split ``plan`` chooses when ``plan_time_limit_s > 0``, and every one-layer
    boundary move of each (the planner's local moves), deduplicated in that order."""
    layers = model.expanded()
    free = cluster.model_copy(update={"memory_per_device": None, "microbatches": microbatches})
    ctx = SplitContext.of(layers, free, microbatches)
    bal = balanced(ctx)
    found = [bal, adapipe(ctx), uniform(ctx, layers), torchtitan(ctx, layers), megatron(ctx, layers),
             chunk_balanced(ctx), device_balanced(ctx, bal)]
    bases = [tuple(x.bounds) for x in found if x is not None]
    bases.append(tuple(window_split(layers, free, microbatches)))
    if plan_time_limit_s > 0:
        chosen = plan(model, free, "auto", plan_time_limit_s)
        if chosen.stages:
            st = sorted(chosen.stages, key=lambda s: s.stage)
            bases.insert(0, (*(s.layers[0] for s in st), st[-1].layers[1]))
    out: list[tuple[int, ...]] = []
    for b in bases:
        out.append(b)
        for k in range(1, len(b) - 1):
            for step in (-1, 1):
                moved = list(b)
                moved[k] += step
                if moved[k - 1] < moved[k] < moved[k + 1]:
                    out.append(tuple(moved))
    return [list(zip(b[:-1], b[1:], strict=True)) for b in dict.fromkeys(out)]

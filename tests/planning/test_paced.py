"""The paced split: in-flight counts from Little's law, and the split they pick on a tight 70B pipeline."""

from __future__ import annotations

import math

import pytest
from planning_models import small_model

from pipesched.solver.costmodel import (
    DEVICES,
    TransformerConfig,
    default_cluster,
    transformer_model,
)
from pipesched.solver.planning import Cluster
from pipesched.solver.planning.paced import inflight, paced, round_trips
from pipesched.solver.planning.planner import _Search
from pipesched.solver.planning.split import SplitContext, balanced


def _case(shape: dict, seq: int, memory: float) -> tuple[list, Cluster]:
    """A ``benchmarks/plan.py`` case: p = 8, V = 128k, 32 microbatches, ``memory`` GiB per device."""
    config = TransformerConfig(vocab=128_000, seq=seq, microbatch_size=1, **shape)
    device = DEVICES["h100"]
    cluster = default_cluster(config, device, devices=8, microbatches=32).model_copy(
        update={"memory_per_device": memory})
    return transformer_model(config, device).expanded(), cluster


BIG = dict(hidden=8192, layers=80, heads=64, kv_heads=8, ffn=28672, tp=8)  # 70B, tensor parallel 8
SMALL = dict(hidden=4096, layers=32, heads=32, kv_heads=8, ffn=14336, tp=1)  # 8B


def three_devices(memory: float | None) -> Cluster:
    return Cluster.model_validate({"devices": 3, "memory_per_device": memory, "microbatches": 6,
                                   "link": {"latency": 0.5, "bandwidth": 2.0}})


def test_round_trips_are_the_chain_from_each_stage_on_and_back():
    # embed (F .5, B 0), 4 blocks (F 1, B 1), head (F 2, B 2); each crossing 0.5 + 1 / 2 = 1.0
    layers = small_model().expanded()
    ctx = SplitContext.of(layers, three_devices(None), 6)
    bounds = (0, 2, 4, 6)  # [embed, b0] [b1, b2] [b3, head]
    assert round_trips(layers, ctx, bounds) == pytest.approx([
        0.5 + 4 * 2 + 4 + 2 * 2 * 1.0,  # every layer, two crossings each way
        3 * 2 + 4 + 2 * 1.0,
        2 + 4])


def test_inflight_is_littles_average_plus_one_at_most_m():
    layers = small_model().expanded()
    ctx = SplitContext.of(layers, three_devices(None), 6)
    bounds = (0, 2, 4, 6)
    r = round_trips(layers, ctx, bounds)
    assert inflight(layers, ctx, bounds, 30.0) == tuple(math.ceil(6 * x / 30.0) + 1 for x in r) == (5, 4, 3)  # R = 16.5, 12, 6
    assert inflight(layers, ctx, bounds, 1.0) == (6, 6, 6)  # capped at m


def test_paced_needs_a_cap_and_a_step():
    layers = small_model().expanded()
    assert paced(layers, SplitContext.of(layers, three_devices(None), 6), 30.0)[0] is None
    capped = SplitContext.of(layers, three_devices(40.0), 6)
    assert paced(layers, capped, 0.0)[0] is None
    assert paced(layers, capped, math.inf)[0] is None
    found, ctx = paced(layers, capped, 30.0)
    assert found is not None and ctx.k != capped.k


def test_paced_split_of_the_70b_p8_tight_case():
    """``benchmarks/plan.py``'s 70B, V = 128k, s = 4k, p = 8 tight case, at its plan bound (2748.48 ms):
    Little's law asks fewer microbatches in flight than 1F1B early and more late, so no stage from the
    fifth on takes 12 blocks (1F1B's balanced split gives the seventh 12, whose held Ws alone bound
    that split at 3041.8) and only the first stage recomputes, 4 of its 9 blocks."""
    layers, cluster = _case(BIG, 4096, 23.188)
    ctx = SplitContext.of(layers, cluster, 32)
    assert ctx.k == [8, 7, 6, 5, 4, 3, 2, 1]
    assert balanced(ctx).bounds == (0, 10, 19, 28, 38, 48, 59, 71, 82)  # stage 6 holds 12 blocks
    found, paced_ctx = paced(layers, ctx, 2748.48)
    assert paced_ctx.k == [6, 6, 5, 5, 4, 3, 3, 2]
    assert found.bounds == (0, 10, 19, 29, 39, 49, 60, 71, 82)
    assert found.recompute == (True,) + (False,) * 7
    assert found.partial == (4,) + (None,) * 7  # 6 in flight and one W held back; without the W: 2
    b = found.bounds
    assert all(paced_ctx.demand(s, b[s], b[s + 1], found.recompute[s]) <= paced_ctx.budget[s] + 1e-9 for s in range(8))


def test_the_planner_offers_the_paced_split_only_under_every_other_rules_bound():
    """70B p = 8 tight: the paced split's bound (2865.1) is under every other rule's (the AdaPipe-style
    3056.1), so it is a rule; 8B s = 8k p = 8 tight: it is not (6186.0 against 6159.6), so it is neither
    offered nor left among the seen splits (the walk may still reach it)."""
    big, big_cluster = _case(BIG, 4096, 23.188)
    search = _Search(big, big_cluster, 32, "auto", budget=10.0, wall=60.0, floor=2748.48)
    rules = search.rules()
    assert rules["paced"].bounds == (0, 10, 19, 29, 39, 49, 60, 71, 82)
    offered = search.seen[rules["paced"]].bound
    assert all(offered < search.seen[s].bound for name, s in rules.items() if s is not None and not name.startswith("paced"))
    small, small_cluster = _case(SMALL, 8192, 45.451)
    search = _Search(small, small_cluster, 32, "auto", budget=10.0, wall=60.0, floor=6000.2)
    found, _ = paced(small, search.ctx, 6000.2)
    assert found is not None and search.rules()["paced"] is None
    assert found not in search.seen

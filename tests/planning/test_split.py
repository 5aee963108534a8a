"""Split rules on hand-built models: the DPs match brute force, the baselines follow their rules."""

from __future__ import annotations

import itertools
import random

import pytest
from planning_models import small_model

from pipesched.solver.planning import Cluster, Model
from pipesched.solver.planning.induce import Split
from pipesched.solver.planning.split import (
    SplitContext,
    adapipe,
    balanced,
    chunk_balanced,
    device_balanced,
    least_recompute,
    megatron,
    min_max_cap,
    torchtitan,
    uniform,
)


def all_splits(n: int, stages: int) -> list[tuple[int, ...]]:
    return [(0, *cuts, n) for cuts in itertools.combinations(range(1, n), stages - 1)]


def brute_min_max(ctx: SplitContext) -> float:
    """Least heaviest-stage work over every split and recompute choice the memory estimate allows."""
    t, best = ctx.table, float("inf")
    for b in all_splits(t.n, ctx.S):
        works = [min((t.work(b[s], b[s + 1], rc) for rc in (False, True)
                      if (not rc or t.can_recompute(b[s], b[s + 1]))
                      and ctx.demand(s, b[s], b[s + 1], rc) <= ctx.budget[s] + 1e-9), default=float("inf"))
                 for s in range(ctx.S)]
        best = min(best, max(works))
    return best


def random_model(rng: random.Random, n: int) -> Model:
    layers = []
    for k in range(n):
        f = rng.choice([0.5, 1.0, 2.0, 3.0])
        layer = {"name": f"l{k}", "forward": f, "backward_input": f, "backward_weight": rng.choice([0.0, f]),
                 "memory": {"forward": 2.0 * f, "backward_input": -f, "backward_weight": -f},
                 "static": rng.choice([1.0, 2.0])}
        if rng.random() < 0.7:
            layer["recompute"] = {"memory": {"forward": 0.5, "backward_input": -0.5}}
        layers.append(layer)
    return Model.model_validate({"layers": layers})


@pytest.mark.parametrize("seed", range(12))
def test_balanced_dp_reaches_the_brute_forced_least_heaviest_stage(seed: int) -> None:
    rng = random.Random(seed)
    model = random_model(rng, rng.randint(3, 7))
    p = rng.randint(1, min(3, len(model.layers)))
    memory = rng.choice([None, 14.0, 20.0, 30.0])
    ctx = SplitContext.of(model.expanded(), Cluster(devices=p, microbatches=4, memory_per_device=memory), 4)
    expected = brute_min_max(ctx)
    assert min_max_cap(ctx) == pytest.approx(expected)
    split = balanced(ctx)
    if expected == float("inf"):
        assert split is None
    else:
        assert split is not None and split.errors(ctx.table.n, ctx.S) == []
        t, b = ctx.table, split.bounds
        assert max(t.work(b[s], b[s + 1], split.recompute[s]) for s in range(ctx.S)) == pytest.approx(expected)


def test_balanced_recomputes_only_where_memory_requires() -> None:
    layers = small_model(8).expanded()  # works: embed 1, blocks 3 each, head 6 -> 31
    free = SplitContext.of(layers, Cluster(devices=3, microbatches=6), 6)
    split = balanced(free)
    assert split is not None and not any(split.recompute)
    b = split.bounds  # 10 | 9 | 12 or 10 | 12 | 9: no split has every stage under 12
    assert max(free.table.work(b[s], b[s + 1]) for s in range(3)) == 12.0 == min_max_cap(free)
    # at 22 per device, stages holding 3, 2, 1 microbatches fit at most 2, 3 and 2 blocks as they are;
    # recomputing 3 blocks on stage 0 fits (static 11 + 3 x 1.25 + transient 6) and costs 3 more
    tight = SplitContext.of(layers, Cluster(devices=3, microbatches=6, memory_per_device=22.0), 6)
    split = balanced(tight)
    assert split == Split.of([0, 4, 7, 10], [True, False, False])
    assert min_max_cap(tight) == 13.0
    assert least_recompute(tight, 1.0) is None  # no split has every stage under 1 ms


def test_adapipe_trades_a_heavier_stage_for_less_recompute_when_its_estimate_says_so() -> None:
    layers = small_model(8).expanded()
    ctx = SplitContext.of(layers, Cluster(devices=3, microbatches=2, memory_per_device=28.0), 2)
    bal, ada = balanced(ctx), adapipe(ctx)
    assert bal is not None and ada is not None

    def estimate(split: Split) -> float:
        t, b = ctx.table, split.bounds
        works = [t.work(b[s], b[s + 1], split.recompute[s]) for s in range(ctx.S)]
        return (ctx.microbatches - 1) * max(works) + sum(works)

    assert estimate(ada) <= estimate(bal)


def test_uniform_and_torchtitan_follow_their_rules() -> None:
    layers = small_model(8).expanded()  # embed, block.0-7, head
    ctx = SplitContext.of(layers, Cluster(devices=4, microbatches=8), 8)
    assert uniform(ctx, layers) == Split.of([0, 3, 5, 7, 10])  # 2 blocks each, embed and head at the ends
    assert torchtitan(ctx, layers) == Split.of([0, 3, 6, 8, 10])  # 10 units: 3, 3, 2, 2


def test_megatron_puts_fewer_blocks_next_to_a_heavy_head() -> None:
    layers = small_model(8).expanded()  # works: embed 1, blocks 3, head 6
    ctx = SplitContext.of(layers, Cluster(devices=4, microbatches=8), 8)
    split = megatron(ctx, layers)
    assert split is not None and split.bounds[-2] == 8  # one block beside the head
    t, b = ctx.table, split.bounds
    assert max(t.work(b[s], b[s + 1]) for s in range(4)) == 9.0  # uniform's 2 blocks + head: 12


def test_chunk_caps_balance_devices_that_pair_stages() -> None:
    # V placement on 2 devices: device 0 holds stages 0 and 3, device 1 stages 1 and 2. Equal stage
    # caps give every stage 3 ms; a cap of 4 on the first chunk and 2 on the second pairs them evenly.
    model = Model.model_validate({"layers": [{"name": "x", "repeat": 6, "forward": 1.0, "backward_input": 0.0,
                                              "backward_weight": 0.0}]})
    cluster = Cluster(devices=2, stages_per_device=2, placement="v", microbatches=4)
    ctx = SplitContext.of(model.expanded(), cluster, 4)
    split = chunk_balanced(ctx)
    assert split is not None and split.errors(6, 4) == []

    def device_work(s: Split) -> list[float]:
        work = [0.0, 0.0]
        for k in range(4):
            work[ctx.device[k]] += ctx.table.work(s.bounds[k], s.bounds[k + 1])
        return work

    assert device_work(split) == [3.0, 3.0]
    assert chunk_balanced(SplitContext.of(model.expanded(), Cluster(devices=2, microbatches=4), 4)) is None


def test_transfers_move_layers_through_stages_until_v_devices_balance() -> None:
    layers = small_model(10).expanded()  # embed, 10 blocks, a head worth two blocks
    cluster = Cluster(devices=2, stages_per_device=2, placement="v", microbatches=8)
    ctx = SplitContext.of(layers, cluster, 8)
    start = Split.of([0, 1, 2, 3, 12])  # device 0: embed + 7 blocks + head = 28, device 1: 6

    def busiest(s: Split) -> float:
        work = [0.0, 0.0]
        for k in range(4):
            work[ctx.device[k]] += ctx.table.work(s.bounds[k], s.bounds[k + 1])
        return max(work)

    moved = device_balanced(ctx, start)
    assert moved is not None and moved.errors(len(layers), 4) == []
    assert busiest(moved) == 19.0  # 37 ms of whole layers on two devices: 19 | 18 at best
    assert device_balanced(SplitContext.of(layers, Cluster(devices=2, microbatches=8), 8), start) is start


def torchtitan_block_counts(blocks: int, stages: int) -> list[int]:
    """Blocks per stage as torchtitan's generate_llm_fqn_per_model_part assigns them with input and output
    weight 1 (written from its documented algorithm: a stage-by-stage walk handing out blocks)."""
    effective = blocks + 2
    per, extra = divmod(effective, stages)
    counts, handed = [], 0
    for s in range(stages):
        share = per + (1 if s < extra else 0)
        take = share - 1 if s in (0, stages - 1) else share
        take = max(0, min(take, blocks - handed))
        counts.append(take)
        handed += take
    return counts


@pytest.mark.parametrize(("blocks", "stages"), [(32, 4), (32, 8), (80, 16), (16, 8), (30, 4), (6, 8), (7, 3)])
def test_the_torchtitan_rule_gives_torchtitans_block_counts(blocks: int, stages: int) -> None:
    model = small_model(blocks)
    layers = model.expanded()
    ctx = SplitContext.of(layers, Cluster(devices=stages, microbatches=stages), stages)
    split = torchtitan(ctx, layers)
    assert split is not None
    b = split.bounds
    got = [b[s + 1] - b[s] for s in range(stages)]
    got[0] -= 1  # the embedding
    got[-1] -= 1  # the head
    assert got == torchtitan_block_counts(blocks, stages)


def test_the_torchtitan_rule_refuses_more_stages_than_effective_layers_as_torchtitan_does() -> None:
    layers = small_model(4).expanded()
    ctx = SplitContext.of(layers, Cluster(devices=6, microbatches=6), 6)  # 6 layers, 4 + 2 effective: fits
    assert torchtitan(ctx, layers) is not None
    plain = Model.model_validate({"layers": [{"name": "block", "repeat": 6, "forward": 1.0}]}).expanded()
    ctx = SplitContext.of(plain, Cluster(devices=6, microbatches=6), 6)  # no input/output layer: 2 stages empty
    assert torchtitan(ctx, plain) is None

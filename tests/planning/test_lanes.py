"""The memory-lanes term of the plan bound: the fractional recompute it assumes is never dearer than a
real choice, and under a tight cap it raises the bound without passing a brute-forced optimum."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from plan_brute_force import best_over_splits_and_recompute, head_heavy_model

from pipesched.solver.planning import Cluster
from pipesched.solver.planning.bound import plan_lower_bound
from pipesched.solver.planning.lanes import applies, least_cost, slot_choices


@pytest.mark.parametrize("seed", range(20))
def test_fractional_recompute_never_costs_more_than_any_subset_that_saves_as_much(seed: int) -> None:
    rng = random.Random(seed)
    items = [(rng.choice([0.5, 1.0, 2.0, 3.0]), rng.choice([0.0, 1.0, 2.0, 4.0])) for _ in range(rng.randint(1, 6))]
    items.sort(key=lambda it: float("-inf") if it[1] == 0 else -it[0] / it[1])
    need = rng.uniform(0.1, sum(s for s, _ in items) + 1.0)
    subsets = [sum(c for _, c in pick) for k in range(len(items) + 1)
               for pick in itertools.combinations(items, k) if sum(s for s, _ in pick) >= need]
    found = least_cost(items, need)
    if subsets:
        assert found <= min(subsets) + 1e-12
    else:
        assert found == float("inf")


def test_lane_counts_grow_with_recompute_and_stop_at_all_microbatches() -> None:
    """Five blocks hold 2 each (0.5 recomputed, 1 forward time re-run per block): with 20 of memory 2
    lanes fit plain, and recomputing buys 3 (ceil(6 / 3) = 2 rounds) and then all 6 microbatches."""
    layers = head_heavy_model(random.Random(0), 6).expanded()
    assert applies(layers)
    options = slot_choices(layers, 0, 5, 0, limit=20.0, m=6, upto=1)  # above 1: each new lane count only
    assert [math.ceil(6 / k) for _, k in options] == [3, 2, 1]
    xs = [x for x, _ in options]
    assert xs[0] == 0 and xs == sorted(xs) and xs[-1] <= 5
    # 10 held against 4 of memory: one microbatch fits only after saving 6, 4 blocks' forward re-run
    (x, k), = slot_choices(layers, 0, 5, 0, limit=4.0, m=6, upto=1)
    assert math.ceil(6 / k) == 6 and abs(x - 4) < 1e-6
    assert slot_choices(layers, 0, 5, 0, limit=-1.0, m=6, upto=1) == []


def test_under_a_tight_cap_the_lanes_raise_the_bound_but_not_above_the_best_plan() -> None:
    p, m = 2, 3
    model = head_heavy_model(random.Random(3), 6)
    free = Cluster(devices=p, microbatches=m, link={"latency": 0.5})
    tight = free.model_copy(update={"memory_per_device": 13.0})
    low, high = (plan_lower_bound(model.expanded(), c, m).value for c in (free, tight))
    assert high > low
    assert high <= best_over_splits_and_recompute(model, tight, m) + 1e-9

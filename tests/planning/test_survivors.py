"""The bound-guided splits: the relaxed floor of a split never passes the best schedule of that split
under any recompute choice, and the enumeration drops no split that could beat its target (brute
force: every split x every per-layer recompute count x a proven-optimal CP-SAT solve)."""

from __future__ import annotations

import random

import pytest
from plan_brute_force import best_per_split, head_heavy_model

from pipesched.solver import SolveOptions, solve
from pipesched.solver.planning import Cluster, Model
from pipesched.solver.planning.bound import plan_lower_bound, split_bound
from pipesched.solver.planning.induce import InfeasibleSplit, Split, induce
from pipesched.solver.planning.survivors import ranked, relaxed_problem, split_floor, surviving

CASES = [  # devices, stages_per_device, placement, layers, memory per device (None: unbounded), split
    # backward, whether boundaries send different sizes
    (2, 2, "v", 5, 14.0, True, False), (2, 2, "loop", 5, 14.0, True, True), (3, 1, "loop", 5, 12.0, True, False),
    (2, 1, "loop", 5, 9.0, True, True), (2, 2, "v", 5, None, True, True), (2, 2, "loop", 4, None, False, False),
    (3, 1, "loop", 5, 11.0, False, True), (2, 1, "loop", 5, 13.0, True, False),
]


def case_of(k: int) -> tuple[Cluster, Model, int]:
    p, v, placement, n, memory, split, varied = CASES[k]
    rng = random.Random(k)
    m = 3 if p * v <= 3 else 2
    cluster = Cluster(devices=p, stages_per_device=v, placement=placement, microbatches=m, split_backward=split,
                      memory_per_device=memory, link={"latency": 0.5, "bandwidth": 2.0})
    return cluster, head_heavy_model(rng, n, varied_outputs=varied), m


@pytest.mark.parametrize("k", range(len(CASES)))
def test_split_floors_stay_under_every_recompute_choice_and_survivors_keep_every_split_under_target(k: int) -> None:
    cluster, model, m = case_of(k)
    layers = model.expanded()
    best = best_per_split(model, cluster, m)
    optimum = min(best.values())
    assert optimum < float("inf")
    for bounds, value in best.items():
        assert split_floor(layers, cluster, bounds, m) <= value + 1e-9, bounds
    assert plan_lower_bound(layers, cluster, m).value <= optimum + 1e-9
    for target in (optimum * 1.001, optimum * 1.2, optimum * 2):
        found = surviving(layers, cluster, m, target)
        assert found is not None
        listed = {b for _, b in found}
        assert all(bounds in listed for bounds, value in best.items() if value < target), target
        assert all(cheap < target for cheap, _ in found)
        kept = ranked(layers, cluster, m, target, 0.0)
        assert all(bounds in kept for bounds, value in best.items() if value < target
                   and split_floor(layers, cluster, bounds, m) < target and len(found) <= 64)


@pytest.mark.parametrize("k", range(len(CASES)))
def test_split_bound_uses_each_boundarys_own_lag(k: int) -> None:
    """Boundaries that send different sizes lag differently; the cheap split bound (which prunes moves)
    must not charge every boundary the largest lag."""
    cluster, model, m = case_of(k)
    layers = model.expanded()
    rng = random.Random(k)
    for _ in range(3):
        cuts = sorted(rng.sample(range(1, len(layers)), cluster.num_stages - 1))
        try:
            problem = induce(layers, cluster, Split.of([0, *cuts, len(layers)], [True] * cluster.num_stages), m)
        except InfeasibleSplit:
            continue
        schedule = solve(problem, "cpsat", SolveOptions(time_limit_s=20))
        if schedule.status == "infeasible":
            continue
        proven = schedule.objective_value if schedule.status == "optimal" else schedule.lower_bound
        assert split_bound(problem) <= proven + 1e-9, cuts


def test_the_relaxed_problem_can_only_lose_memory_and_time() -> None:
    """A split no recompute choice fits (static memory over a device) has an infinite floor."""
    model = head_heavy_model(random.Random(1), 4)
    cluster = Cluster(devices=2, microbatches=2, memory_per_device=3.5)
    layers = model.expanded()
    assert split_floor(layers, cluster, (0, 1, 4), 2) == float("inf")  # 3 blocks' + head's static: 5


@pytest.mark.parametrize("seed", range(6))
def test_the_relaxed_problem_holds_no_more_than_any_recompute_choice_and_runs_plain(seed: int) -> None:
    """Per stage, what a microbatch holds after F and after B in the relaxed Problem is at most what it
    holds plain and recomputed, and its costs are the plain ones (recompute only adds time)."""
    rng = random.Random(seed)
    model = head_heavy_model(rng, 6, varied_outputs=True)
    cluster = Cluster(devices=2, stages_per_device=2, placement=rng.choice(["v", "loop"]), microbatches=3,
                      memory_per_device=40.0)
    layers = model.expanded()
    bounds = (0, *sorted(rng.sample(range(1, 6), 3)), 6)
    relaxed = relaxed_problem(layers, cluster, bounds, 3)
    free = cluster.model_copy(update={"memory_per_device": None})
    plain = induce(layers, free, Split.of(bounds), 3)
    full = induce(layers, free, Split.of(bounds, [True] * 4), 3)
    assert relaxed is not None and relaxed.costs == plain.costs
    for p in (plain, full):
        for s in range(4):
            after_f = relaxed.memory.forward[s]
            assert after_f <= p.memory.forward[s] + 1e-12
            assert after_f + relaxed.memory.backward_input[s] <= p.memory.forward[s] + p.memory.backward_input[s] + 1e-12
    assert any(relaxed.memory.forward[s] < plain.memory.forward[s] for s in range(4))

"""The plan's lower bound never exceeds the best step time over every split (brute force, exact solves)."""

from __future__ import annotations

import itertools
import random

import pytest

from pipesched.solver import SolveOptions, solve
from pipesched.solver.planning import Cluster, Model
from pipesched.solver.planning.bound import plan_lower_bound, split_bound
from pipesched.solver.planning.induce import Split, induce


def tiny_model(rng: random.Random, n: int) -> Model:
    layers = []
    for k in range(n):
        f = rng.choice([1, 2, 3])
        layers.append({"name": f"l{k}", "forward": f, "backward_input": rng.choice([f, 2 * f]),
                       "backward_weight": rng.choice([0, f]), "output": 1.0})
    return Model.model_validate({"layers": layers})


def best_over_all_splits(model: Model, cluster: Cluster, m: int) -> float:
    """min over every split of the proven-optimal objective of its induced problem (and each split's
    own bound, which ranks candidates in the planner, never above its optimum)."""
    layers, best = model.expanded(), float("inf")
    for cuts in itertools.combinations(range(1, len(layers)), cluster.num_stages - 1):
        problem = induce(layers, cluster, Split.of([0, *cuts, len(layers)]), m)
        schedule = solve(problem, "cpsat", SolveOptions(time_limit_s=20))
        assert schedule.status == "optimal", (cuts, schedule.status)
        assert split_bound(problem) <= schedule.objective_value + 1e-9, cuts
        best = min(best, schedule.objective_value)
    return best


CASES = [  # devices, stages_per_device, placement, objective, latency, split_backward
    (1, 1, "loop", "makespan", 0.0, True), (2, 1, "loop", "makespan", 0.0, True),
    (3, 1, "loop", "makespan", 1.0, True), (2, 1, "loop", "stage_span", 0.0, True),
    (3, 1, "loop", "stage_span", 1.0, True), (2, 2, "loop", "makespan", 1.0, True),
    (2, 2, "v", "makespan", 0.0, True), (2, 2, "v", "stage_span", 1.0, True),
    (3, 1, "loop", "makespan", 0.0, False), (2, 2, "loop", "makespan", 1.0, False),
]


@pytest.mark.parametrize("case", range(len(CASES) * 2))
def test_lower_bound_is_never_above_the_brute_forced_optimum_over_all_splits(case: int) -> None:
    p, v, placement, objective, latency, split = CASES[case % len(CASES)]
    rng = random.Random(case)
    model = tiny_model(rng, rng.randint(p * v, 6))
    m = rng.choice([2, 3])
    cluster = Cluster(devices=p, stages_per_device=v, placement=placement, objective=objective,
                      microbatches=m, link={"latency": latency}, split_backward=split)
    bound = plan_lower_bound(model.expanded(), cluster, m)
    assert bound.value <= best_over_all_splits(model, cluster, m) + 1e-9, bound.derivation


def test_lower_bound_is_the_classic_formula_for_uniform_layers_one_per_device() -> None:
    model = Model.model_validate({"layers": [{"name": "x", "repeat": 4, "forward": 1.0, "backward_input": 2.0,
                                              "backward_weight": 1.0}]})
    cluster = Cluster(devices=4, microbatches=8)
    bound = plan_lower_bound(model.expanded(), cluster, 8)
    assert bound.value == 3 * 1.0 + 8 * 4.0  # (p - 1) F + m (F + B + W)
    assert "stage windows" in bound.derivation

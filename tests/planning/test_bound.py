"""The plan's lower bound never exceeds the best step time over every split (brute force, exact solves)."""

from __future__ import annotations

import itertools
import random

import pytest
from plan_brute_force import best_over_splits_and_recompute, head_heavy_model

from pipesched.solver import SolveOptions, solve
from pipesched.solver.planning import Cluster, Model
from pipesched.solver.planning.bound import (
    PAIRED_RTOL,
    _least_paired,
    _paired_feasible,
    plan_lower_bound,
    split_bound,
)
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


def paired_brute_force(work: list[float], alpha: list, m: int, p: int, placement: str) -> float:
    """min over every split into 2p stages of ``max_d alpha_d(b_d) + m · work(d)``, by enumeration."""
    n, best = len(work), float("inf")
    for cuts in itertools.combinations(range(1, n), 2 * p - 1):
        b = [0, *cuts, n]
        load = [0.0] * p
        for s in range(2 * p):
            d = s if s < p else (2 * p - 1 - s if placement == "v" else s - p)
            load[d] += sum(work[b[s]:b[s + 1]])
        best = min(best, max(alpha[d](b[d]) + m * load[d] for d in range(p)))
    return best


@pytest.mark.parametrize("seed", range(12))
def test_the_paired_device_bisection_finds_the_least_busiest_device_over_all_splits(seed: int) -> None:
    """Exact up to the bisection's tolerance, from below: neither a bound above a split (invalid) nor a
    slack one (the DP must see every split)."""
    rng = random.Random(seed)
    p, placement = rng.choice([2, 3]), rng.choice(["loop", "v"])
    n = rng.randint(2 * p, 2 * p + 3)
    work = [float(rng.choice([1, 2, 3, 5])) for _ in range(n)]
    fwd = [w / 3 for w in work]
    alpha = [lambda i, d=d: sum(fwd[:i]) + 0.5 * d for d in range(p)]
    m = rng.choice([1, 2, 4])
    prefix = [sum(work[:k]) for k in range(n + 1)]
    feasible = _paired_feasible(prefix, alpha, m, placement)
    assert feasible is not None
    exact = paired_brute_force(work, alpha, m, p, placement)
    assert not feasible(exact * (1 - 1e-6)) and feasible(exact * (1 + 1e-9))
    found = _least_paired(feasible, 0.0, 10 * exact)
    assert exact * (1 - 2 * PAIRED_RTOL) <= found <= exact


MEMORY_CASES = [  # devices, stages_per_device, placement, layers, memory per device
    (2, 2, "v", 5, 14.0), (2, 2, "loop", 5, 14.0), (3, 1, "loop", 5, 12.0), (2, 1, "loop", 6, 13.0),
]


@pytest.mark.parametrize("case", range(len(MEMORY_CASES)))
def test_the_bound_holds_over_every_split_and_recompute_choice_under_tight_memory(case: int) -> None:
    p, v, placement, n, memory = MEMORY_CASES[case]
    m = 3
    cluster = Cluster(devices=p, stages_per_device=v, placement=placement, microbatches=m,
                      memory_per_device=memory, link={"latency": 0.5})
    model = head_heavy_model(random.Random(case), n)
    best = best_over_splits_and_recompute(model, cluster, m)
    assert best < float("inf")  # some split fits: the memory is tight, not impossible
    bound = plan_lower_bound(model.expanded(), cluster, m)
    assert bound.value <= best + 1e-9, bound.derivation


def test_with_two_stages_per_device_the_busiest_device_over_all_splits_is_the_bound() -> None:
    """A heavy head that no split can balance: the device windows bind, above the per-stage terms."""
    model = Model.model_validate({"layers": [{"name": "b", "repeat": 5, "forward": 1, "backward_input": 1,
                                              "backward_weight": 1}, {"name": "head", "forward": 4,
                                              "backward_input": 4, "backward_weight": 4}]})
    cluster = Cluster(devices=2, stages_per_device=2, placement="v", microbatches=4)
    bound = plan_lower_bound(model.expanded(), cluster, 4)
    assert bound.derivation.endswith("the largest is the device windows (bisection over splits)")
    # device 0 holds the head (12) with at least block 0 (3): m x 15 = 60 over 4 microbatches; the
    # average device is (4 x 27 + 1) / 2 = 54.5
    assert 60 * (1 - 1e-5) <= bound.value <= 60
    assert bound.value <= best_over_all_splits(model, cluster, 4) + 1e-9

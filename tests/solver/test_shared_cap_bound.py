"""The shared-cap bound never exceeds a schedule's value, nor the brute-forced optimum, and it bites.

Random small V and interleaved (loop, v = 2) problems under a cap, uneven per-stage costs and memory
(F takes, B gives some back, W the rest), both objectives, split and fused backward. The oracle is
:mod:`bruteforce` (which uses no bound of the library) on the smallest ones, and on the rest the value
of the ILP's schedule: every valid schedule is at least the optimum, so the bound must not exceed it
(a proven-optimal ILP answer makes that the optimum itself).
"""

from __future__ import annotations

import random

import pytest
from bruteforce import optimum

from pipesched.solver import Instance, Problem, SolveOptions, solve, stage_device
from pipesched.solver.bounds.analytic import lower_bound
from pipesched.solver.bounds.combinatorial import (
    combinatorial_bound,
    energy_bound,
    relay_bound,
    round_trip_span_bound,
)
from pipesched.solver.bounds.shared_cap import shared_cap_bound, shared_cap_spans
from pipesched.solver.bounds.v_turn import v_turn_bound


def _random_problem(seed: int, devices: int, microbatches: int) -> Problem:
    """A capped problem, v = 2, whose cap holds one microbatch on every chunk of a device and up to 2.6x that."""
    rng = random.Random(seed)
    placement = rng.choice(["v", "loop"])
    stages = 2 * devices
    split = rng.random() < 0.75

    def draw(lo: float, hi: float) -> list[float]:
        return [round(rng.uniform(lo, hi), 2) for _ in range(stages)]

    l1 = draw(0.5, 1.5)
    back = [round(-x * rng.uniform(0.2, 0.9), 3) for x in l1]
    held = [0.0] * devices
    for s in range(stages):
        held[stage_device(s, devices, placement)] += l1[s]
    costs: dict = {"forward": draw(0.5, 3.0), "backward_input": draw(0.5, 3.0), "comm": rng.choice([0.0, 0.3])}
    memory: dict = {"forward": l1, "backward_input": back if split else [-x for x in l1], "backward_weight": 0.0,
                    "limit": round(max(held) * rng.uniform(1.0, 2.6), 3)}
    if split:
        costs["backward_weight"] = draw(0.2, 1.5)
        memory["backward_weight"] = [-(x + y) for x, y in zip(l1, back, strict=True)]
    return Problem(devices=devices, microbatches=microbatches, stages_per_device=2, placement=placement,
                   objective=rng.choice(["makespan", "stage_span"]), split_backward=split, costs=costs, memory=memory)


def _at_most(bound: float, value: float, problem: Problem) -> None:
    assert bound <= value + 1e-9 * max(1.0, value), f"bound {bound} > {value}: {problem.model_dump_json()}"


@pytest.mark.parametrize("seed", range(24))
def test_shared_cap_bound_never_exceeds_the_brute_forced_optimum(seed: int) -> None:
    problem = _random_problem(seed, 2, 2)
    best = optimum(problem)
    assert best is not None, "the cap holds a microbatch on every chunk, so a schedule exists"
    inst = Instance.from_problem(problem)
    _at_most(shared_cap_bound(inst), best, problem)
    _at_most(combinatorial_bound(inst), best, problem)


@pytest.mark.parametrize("seed", range(100, 130))
def test_shared_cap_bound_never_exceeds_a_schedule(seed: int) -> None:
    rng = random.Random(seed)
    problem = _random_problem(seed, rng.choice([2, 3]), rng.choice([3, 4]))
    # any valid schedule is at least the optimum; the ILP's best after a short run is close to it,
    # so the check is nearly as sharp as against the optimum (a longer limit cost minutes of CI)
    schedule = solve(problem, "ilp", SolveOptions(time_limit_s=1))
    assert schedule.objective_value is not None
    inst = Instance.from_problem(problem)
    _at_most(shared_cap_bound(inst), schedule.objective_value, problem)
    _at_most(combinatorial_bound(inst), schedule.objective_value, problem)


def test_shared_cap_bound_bites_on_interleaved_under_a_tight_cap() -> None:
    """Loop placement, room for one microbatch on both chunks and one more forward: the device idles
    while a microbatch goes round, which the one-stage-per-device bounds do not see; here the bound
    proves the brute-forced optimum."""
    problem = Problem(devices=2, microbatches=2, stages_per_device=2, placement="loop", objective="stage_span",
                      costs={"forward": 1.0, "backward_input": 1.0, "backward_weight": 0.5, "comm": 0.5},
                      memory={"forward": 1.0, "backward_input": -0.5, "backward_weight": -0.5, "limit": 3.0})
    inst = Instance.from_problem(problem)
    best = optimum(problem)
    assert best is not None
    ours = shared_cap_bound(inst)
    _at_most(ours, best, problem)
    others = max(lower_bound(inst), relay_bound(inst), energy_bound(inst), v_turn_bound(inst), round_trip_span_bound(inst))
    assert ours > others + 1.0  # above every other closed form
    assert ours >= best - 1e-6  # and tight: it proves the optimum
    assert combinatorial_bound(inst) >= ours  # which takes it
    assert min(shared_cap_spans(inst)) >= min(inst.device_work())


def test_shared_cap_bound_is_the_work_without_a_cap() -> None:
    problem = Problem(devices=2, microbatches=3, stages_per_device=2, placement="v", objective="stage_span")
    inst = Instance.from_problem(problem)
    assert shared_cap_spans(inst) == inst.device_work()

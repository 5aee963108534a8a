"""The analytic lower bounds never exceed a brute-forced optimum, and are tight where known."""

from __future__ import annotations

import random

import pytest
from bruteforce import optimum
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesched.solver import Instance, NotApplicableError, Problem, solve
from pipesched.solver.bounds.analytic import (
    device_span_bounds,
    head_work_tail_bound,
    lower_bound,
    makespan_lower_bound,
    rank_makespan_bound,
    subset_bound,
)


def _random_problem(rng: random.Random, objective: str) -> Problem:
    shape = rng.choice([(1, 3, 1, "loop"), (2, 2, 1, "loop"), (2, 3, 1, "loop"), (3, 2, 1, "loop"),
                        (2, 1, 2, "loop"), (2, 2, 2, "loop"), (2, 2, 2, "v"), (2, 1, 2, "v")])
    p, m, v, placement = shape
    stages = p * v
    split = rng.random() < 0.7

    def costs() -> list[float]:
        return [rng.choice([0.5, 1.0, 1.5, 2.0, 3.0]) for _ in range(stages)]

    limit = rng.choice([None, None, 1, 2, [2] * p])
    return Problem(
        devices=p, microbatches=m, stages_per_device=v, placement=placement, split_backward=split,
        costs={"forward": costs(), "backward_input": costs(), "backward_weight": costs(),
               "comm": rng.choice([0.0, 0.0, 0.5, 2.0])},
        memory={"limit": limit}, objective=objective,
    )


@pytest.mark.parametrize("objective", ["makespan", "stage_span"])
def test_bound_never_exceeds_the_brute_force_optimum_on_random_tiny_problems(objective: str) -> None:
    rng = random.Random(20240 + len(objective))
    checked = 0
    for _ in range(40):
        problem = _random_problem(rng, objective)
        best = optimum(problem)
        if best is None:
            continue
        bound = lower_bound(Instance.from_problem(problem))
        assert bound <= best + 1e-9, problem.model_dump_json()
        checked += 1
    assert checked >= 25


HAND_PICKED = {
    "uniform-2x3": dict(devices=2, microbatches=3),
    "uniform-3x2-span": dict(devices=3, microbatches=2, objective="stage_span"),
    "heavy-first-stage": dict(devices=2, microbatches=3, costs={"forward": [4, 1], "backward_input": [1, 1],
                                                                "backward_weight": [1, 1]}),
    "heavy-last-stage-span": dict(devices=3, microbatches=2, objective="stage_span",
                                  costs={"forward": [1, 1, 3], "backward_input": [1, 1, 3], "backward_weight": [0.5, 0.5, 1]}),
    "long-comm": dict(devices=2, microbatches=2, costs={"comm": 5.0}),
    "long-comm-span": dict(devices=2, microbatches=2, costs={"comm": 5.0}, objective="stage_span"),
    "fused-comm": dict(devices=3, microbatches=2, split_backward=False, costs={"comm": 1.0}),
    "fused-span": dict(devices=2, microbatches=3, split_backward=False, objective="stage_span"),
    "limit-1": dict(devices=2, microbatches=3, memory={"limit": 1}),
    "loop-v2": dict(devices=2, microbatches=2, stages_per_device=2, costs={"comm": 0.5}),
    "v-shape-span": dict(devices=2, microbatches=2, stages_per_device=2, placement="v", objective="stage_span"),
    "zero-weight": dict(devices=2, microbatches=3, costs={"backward_weight": 0.0},
                        memory={"forward": 1, "backward_input": -1, "backward_weight": 0}),
}


@pytest.mark.parametrize("name", sorted(HAND_PICKED))
def test_bound_never_exceeds_the_brute_force_optimum_on_hand_picked_cases(name: str) -> None:
    problem = Problem(**HAND_PICKED[name])
    best = optimum(problem)
    assert best is not None
    assert lower_bound(Instance.from_problem(problem)) <= best + 1e-9


@pytest.mark.parametrize(("p", "m"), [(2, 2), (2, 3), (3, 3), (4, 8), (8, 16), (8, 32)])
def test_uniform_makespan_bound_is_the_closed_form(p: int, m: int) -> None:
    inst = Instance.from_problem(Problem(devices=p, microbatches=m))
    assert lower_bound(inst) == (p - 1) * 1.0 + m * 3.0


@pytest.mark.parametrize(("p", "m"), [(2, 2), (2, 3)])
def test_uniform_makespan_closed_form_is_the_optimum_on_tiny_cases(p: int, m: int) -> None:
    assert optimum(Problem(devices=p, microbatches=m)) == (p - 1) + 3 * m


def test_with_fewer_microbatches_than_devices_the_bound_waits_for_device_0s_backwards() -> None:
    # p=3, m=2: device 0's first B waits F+F+F+B+B = 5, then 2(B+W) = 4: 9 > (p-1)F + 3m = 8
    problem = Problem(devices=3, microbatches=2)
    assert lower_bound(Instance.from_problem(problem)) == 9.0 == optimum(problem)


def test_uniform_makespan_bound_counts_comm_in_the_ramp() -> None:
    inst = Instance.from_problem(Problem(devices=4, microbatches=8, costs={"comm": 0.5}))
    assert lower_bound(inst) >= 3 * (1.0 + 0.5) + 8 * 3.0


def test_stage_span_bound_is_the_round_trip_when_the_pipeline_is_short_of_microbatches() -> None:
    # p=4, m=1: device 0 must wait F + 3(F+B) (+ comm) for its B; span = 1+3*2 + 1 + 1 = 9 (no comm)
    inst = Instance.from_problem(Problem(devices=4, microbatches=1, objective="stage_span"))
    assert lower_bound(inst) == 9.0
    assert optimum(Problem(devices=2, microbatches=1, objective="stage_span")) == lower_bound(
        Instance.from_problem(Problem(devices=2, microbatches=1, objective="stage_span")))


def test_stage_span_bound_holds_device_0s_backwards_until_the_round_trip_returns() -> None:
    # heavy stage 1: device 0's first B waits F0 + F1 + B1 = 11, then 2(B+W) = 4; its work is only 6
    problem = Problem(devices=2, microbatches=2, objective="stage_span",
                      costs={"forward": [1, 5], "backward_input": [1, 5], "backward_weight": 1})
    inst = Instance.from_problem(problem)
    assert device_span_bounds(inst)[0] >= 15.0  # ranks add more: device 1's two F(1)s come first
    assert lower_bound(inst) <= optimum(problem) + 1e-9


def test_makespan_bound_is_at_least_the_simple_head_work_tail_bound() -> None:
    rng = random.Random(7)
    for _ in range(30):
        problem = _random_problem(rng, "makespan")
        inst = Instance.from_problem(problem)
        assert makespan_lower_bound(inst) >= head_work_tail_bound(inst) - 1e-12


def test_subset_bound_picks_the_best_window() -> None:
    # job (head, work, tail): alone the late job gives 10 + 1 + 0; all together 0 + 3 + 0
    assert subset_bound([(0.0, 2.0, 0.0), (10.0, 1.0, 0.0)]) == 11.0
    assert subset_bound([(0.0, 2.0, 5.0), (0.0, 2.0, 0.0)]) == 7.0
    assert subset_bound([]) == 0.0


HEURISTICS = ("gpipe", "1f1b", "zb-h1", "zb-h2", "interleaved-1f1b", "zb-v", "dualpipe-v", "greedy")
stage_costs = st.lists(st.sampled_from([0.0, 0.25, 1.0, 1.5, 4.0, 7.0]), min_size=8, max_size=8)


@settings(max_examples=150, deadline=None)
@given(
    shape=st.sampled_from([(1, 1, "loop"), (2, 1, "loop"), (4, 1, "loop"), (3, 2, "loop"), (2, 2, "v"), (4, 2, "v")]),
    m=st.integers(1, 6),
    f=stage_costs, b=stage_costs, w=stage_costs,
    comm=st.sampled_from([0.0, 0.5, 3.0]),
    split=st.booleans(),
    objective=st.sampled_from(["makespan", "stage_span"]),
)
def test_bound_never_exceeds_any_heuristic_schedule(shape: tuple[int, int, str], m: int, f: list[float],
                                                    b: list[float], w: list[float], comm: float, split: bool,
                                                    objective: str) -> None:
    p, v, placement = shape
    stages = p * v
    problem = Problem(devices=p, microbatches=m, stages_per_device=v, placement=placement, split_backward=split,
                      costs={"forward": f[:stages], "backward_input": b[:stages], "backward_weight": w[:stages],
                             "comm": comm}, objective=objective)
    bound = lower_bound(Instance.from_problem(problem))
    for name in HEURISTICS:
        try:
            schedule = solve(problem, name)
        except NotApplicableError:
            continue
        assert bound <= schedule.objective_value + 1e-9, name


@pytest.mark.parametrize("objective", ["makespan", "stage_span"])
def test_memory_lanes_make_the_bound_tight_when_one_microbatch_fits(objective: str) -> None:
    # limit 1: device 0 holds one microbatch from F to W, 3 x (F + F + B + B + W) = 15, all serial
    problem = Problem(devices=2, microbatches=3, memory={"limit": 1}, objective=objective)
    assert lower_bound(Instance.from_problem(problem)) == 15.0 == optimum(problem)


def test_memory_lanes_are_ignored_when_a_stage_can_free_memory_early() -> None:
    # dF + dB < 0: another microbatch's B could make room, so the lane argument does not hold
    problem = Problem(devices=2, microbatches=3,
                      memory={"forward": 1, "backward_input": -2, "backward_weight": 1, "limit": 1})
    inst = Instance.from_problem(problem)
    assert lower_bound(inst) <= optimum(problem) + 1e-9
    assert device_span_bounds(inst)[0] < 15.0


def test_rank_tails_follow_the_path_through_the_serial_class_not_the_longest_branch() -> None:
    # regression: W(2) = 7 is downstream of F(0), but the path through it is shorter than F(0)'s
    # tail, so "tail + (k-1)·7" overshot zb-h1's makespan of 42.75
    problem = Problem(devices=4, microbatches=2, costs={
        "forward": [4.0, 0.25, 1.0, 1.5], "backward_input": [0.25, 4.0, 0.25, 4.0],
        "backward_weight": [4.0, 0.0, 7.0, 1.0], "comm": 3.0})
    inst = Instance.from_problem(problem)
    assert rank_makespan_bound(inst) <= lower_bound(inst) <= solve(problem, "zb-h1").objective_value == 42.75


def test_rank_heads_and_tails_close_the_gap_behind_a_slow_first_stage() -> None:
    # F(0) = 4 spaces the microbatches 4 apart: without ranks the bound is 25.5, the optimum 26.5
    problem = Problem(devices=3, microbatches=3, costs={
        "forward": [4.0, 0.5, 1.0], "backward_input": [0.5, 2.0, 2.0], "backward_weight": [1.0, 4.0, 0.5]})
    inst = Instance.from_problem(problem)
    assert rank_makespan_bound(inst) == 26.5 == lower_bound(inst) == optimum(problem)


def test_brute_force_says_none_when_no_order_fits_the_memory_limit() -> None:
    assert optimum(Problem(devices=2, microbatches=2, memory={"limit": 0.5})) is None
    # one microbatch at a time on device 0: 2 x (F + F + B + B + W) = 10, and the lanes bound sees it
    one_at_a_time = Problem(devices=2, microbatches=2, memory={"limit": 1})
    assert optimum(one_at_a_time) == 10.0 == lower_bound(Instance.from_problem(one_at_a_time))

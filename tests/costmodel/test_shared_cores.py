"""The cores-shared re-timing: the schedule's own makespan with a core per rank, and between that
and the uniformly scaled makespan when ranks share cores."""

from __future__ import annotations

import os

import pytest

from pipesched.solver import Problem, solve
from pipesched.solver.costmodel.shared_cores import (
    cores_makespan,
    curve_makespan,
    shared_cores_makespan,
    usable_cores,
)

COSTS = {"forward": [1.0, 1.5, 1.0, 2.0], "backward_input": [1.0, 1.0, 2.0, 1.5],
         "backward_weight": [0.5, 1.0, 0.5, 1.0], "comm": 0.25}
CASES = [(Problem(devices=4, microbatches=8, costs=COSTS), "1f1b"),
         (Problem(devices=4, microbatches=8, costs=COSTS), "zb-h1"),
         (Problem(devices=4, microbatches=8, costs=COSTS), "gpipe"),
         (Problem(devices=2, microbatches=6, stages_per_device=2, placement="v", costs=COSTS), "zb-v"),
         (Problem(devices=4, microbatches=8, stages_per_device=2, placement="dual",
                  costs=COSTS), "dualpipe")]


@pytest.mark.parametrize("problem, method", CASES, ids=[m for _, m in CASES])
def test_a_core_per_rank_gives_the_schedules_own_makespan(problem: Problem, method: str) -> None:
    schedule = solve(problem, method)
    assert shared_cores_makespan(schedule, 1.0) == pytest.approx(schedule.makespan, rel=1e-9)


@pytest.mark.parametrize("problem, method", CASES, ids=[m for _, m in CASES])
@pytest.mark.parametrize("factor", [1.5, 2.0, 4.0])
def test_shared_cores_cost_more_than_a_core_each_and_less_than_scaling_every_op(problem: Problem, method: str,
                                                                                factor: float) -> None:
    schedule = solve(problem, method)
    got = shared_cores_makespan(schedule, factor)
    assert schedule.makespan < got <= factor * schedule.makespan + 1e-9
    if factor == problem.devices:  # one core in all: nothing runs in parallel
        work = sum(o.end - o.start for o in schedule.ops)
        assert got >= work - 1e-9


def test_a_factor_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="contention must be a finite factor >= 1"):
        shared_cores_makespan(solve(Problem(devices=2, microbatches=2), "1f1b"), 0.5)


@pytest.mark.parametrize("problem, method", CASES, ids=[m for _, m in CASES])
def test_cores_is_the_factor_read_as_a_count_of_cores(problem: Problem, method: str) -> None:
    schedule = solve(problem, method)
    p = problem.devices
    assert cores_makespan(schedule, p / 2) == pytest.approx(shared_cores_makespan(schedule, 2.0), rel=1e-12)
    assert cores_makespan(schedule, p) == pytest.approx(schedule.makespan, rel=1e-9)  # a core per rank
    assert cores_makespan(schedule, 1) >= cores_makespan(schedule, p - 1) > schedule.makespan


def test_fewer_than_zero_cores_are_refused_and_usable_cores_counts_the_affinity_mask() -> None:
    with pytest.raises(ValueError, match="cores must be a finite number > 0"):
        cores_makespan(solve(Problem(devices=2, microbatches=2), "1f1b"), 0)
    assert 1 <= usable_cores() <= (os.cpu_count() or 1)
    assert usable_cores() == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("problem, method", CASES, ids=[m for _, m in CASES])
def test_a_measured_curve_covers_the_factor_and_the_cores_models(problem: Problem, method: str) -> None:
    """A flat curve is a core per rank; the ideal curve of 2 cores is the cores model; every rank always
    at the all-busy slowdown is at most the uniformly scaled makespan; a curve that slows each count of
    busy ranks more gives a longer step."""
    schedule = solve(problem, method)
    p = problem.devices
    assert curve_makespan(schedule, [1.0] * p) == pytest.approx(schedule.makespan, rel=1e-9)
    two_cores = [max(1.0, k / 2) for k in range(1, p + 1)]
    assert curve_makespan(schedule, two_cores) == pytest.approx(cores_makespan(schedule, 2), rel=1e-12)
    assert schedule.makespan < curve_makespan(schedule, [2.0] * p) <= 2.0 * schedule.makespan + 1e-9  # comm not slowed
    vm = [x * 1.2 if k > 0 else x for k, x in enumerate(two_cores)]  # vCPUs that slow each other
    assert cores_makespan(schedule, 2) < curve_makespan(schedule, vm) <= 1.2 * cores_makespan(schedule, 2) + 1e-9
    assert curve_makespan(schedule, [1.0, 1.5]) == curve_makespan(schedule, [1.0, 1.5] + [1.5] * (p - 2))


def test_a_curve_below_one_or_empty_is_refused() -> None:
    schedule = solve(Problem(devices=2, microbatches=2), "1f1b")
    for bad in ([], [0.9, 1.0], [1.0, float("inf")]):
        with pytest.raises(ValueError, match="slowdown must be finite factors >= 1"):
            curve_makespan(schedule, bad)


@pytest.mark.parametrize("problem, method", CASES, ids=[m for _, m in CASES])
def test_a_hand_off_delay_is_the_same_as_more_comm_when_it_does_not_depend_on_the_load(
        problem: Problem, method: str) -> None:
    """No delay changes nothing; a delay d whatever the load is the schedule's order re-timed with
    comm + d (a hand-off only crosses devices, as comm does); a delay only under load lies between."""
    from pipesched.solver import from_order

    schedule = solve(problem, method)
    p, comm = problem.devices, problem.costs.comm
    flat = [1.0] * p
    assert curve_makespan(schedule, flat, [0.0] * (p - 1)) == pytest.approx(schedule.makespan, rel=1e-9)
    more_comm = problem.model_copy(update={"costs": problem.costs.model_copy(update={"comm": comm + 0.5})})
    expected = from_order(more_comm, method, schedule.order()).makespan
    assert curve_makespan(schedule, flat, [0.5]) == pytest.approx(expected, rel=1e-9)
    loaded_only = [0.0] + [0.5] * (p - 2) if p > 2 else [0.0]
    assert schedule.makespan - 1e-9 <= curve_makespan(schedule, flat, loaded_only) <= expected + 1e-9


def test_a_negative_or_empty_hand_off_is_refused() -> None:
    schedule = solve(Problem(devices=2, microbatches=2), "1f1b")
    for bad in ([], [-0.1], [float("nan")]):
        with pytest.raises(ValueError, match="handoff must be finite delays >= 0"):
            curve_makespan(schedule, [1.0], bad)

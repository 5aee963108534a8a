"""The time guard (issue 12, docs/limits.md): decisions from estimates and counts, the clock only as a
reported net. No test here reads a clock: each sets up the work (a limit below the set-up estimate,
a deadline already past) and checks what comes back."""

from __future__ import annotations

import pytest

from pipesched.solver import Instance, Problem, SolveOptions, solve, validate
from pipesched.solver.budget import (
    FULL_MODEL_OPS,
    HEURISTICS_ONLY,
    MODELLED,
    grid_share,
    note_wall_cut,
    records_wall_cuts,
    setup_cost,
    wall_cuts,
)
from pipesched.solver.heuristics.swap_past_w import polish
from pipesched.solver.heuristics.zero_bubble import zb_candidates

#: 1536 ops, zero-bubble costs, cap 2p: large enough that its estimated set-up is well above 1 ms.
BIG = dict(devices=8, microbatches=64, objective="stage_span",
           costs={"forward": 1.0, "backward_input": 1.1, "backward_weight": 0.7, "comm": 0.05},
           memory={"forward": 1.0, "backward_input": -0.6, "backward_weight": -0.4, "limit": 16})


def _below_setup(problem: Problem) -> float:
    return setup_cost(Instance.from_problem(problem)) / 2


@pytest.mark.parametrize("method", ["auto", "cpsat"])
def test_a_limit_below_the_setup_returns_the_first_grid_schedule_and_says_so(method: str) -> None:
    problem = Problem(**BIG)
    inst = Instance.from_problem(problem)
    sched = solve(problem, method, SolveOptions(time_limit_s=_below_setup(problem)))
    assert sched.ops and validate(sched) == []
    assert "first heuristic schedule (zb-auto[0])" in sched.reason and "set-up" in sched.reason
    first = zb_candidates(inst, 0.0)[0]  # the grid's first policy, nothing else
    assert sched.order() == first.order
    assert sched.objective_value == pytest.approx(first.objective)


def test_the_first_schedule_is_the_same_on_every_run() -> None:
    problem = Problem(**BIG)
    limit = _below_setup(problem)
    runs = [solve(problem, "auto", SolveOptions(time_limit_s=limit)).model_dump(exclude={"solve_time_s"})
            for _ in range(2)]
    assert runs[0] == runs[1]


def test_a_limit_above_the_setup_searches_and_is_not_flagged_as_set_up() -> None:
    problem = Problem(**BIG)
    sched = solve(problem, "auto", SolveOptions(time_limit_s=5.0))
    first = zb_candidates(Instance.from_problem(problem), 0.0)[0]
    assert sched.ops and "set-up" not in (sched.reason or "")
    assert sched.objective_value <= first.objective + 1e-9


def test_a_dual_problem_below_its_setup_falls_back_to_a_recipe() -> None:
    problem = Problem(devices=4, microbatches=64, placement="dual", stages_per_device=2)
    sched = solve(problem, "auto", SolveOptions(time_limit_s=_below_setup(problem)))
    assert sched.ops and validate(sched) == []
    assert "first heuristic schedule" in sched.reason and "zb-auto" not in sched.reason


def test_wall_cuts_are_recorded_only_inside_a_solve() -> None:
    note_wall_cut("outside")  # no solve running: nothing to record, nothing raised
    assert wall_cuts() == []

    @records_wall_cuts
    def method() -> list[str]:
        note_wall_cut("phase a")
        note_wall_cut("phase a")
        note_wall_cut("phase b")
        return wall_cuts()

    assert method() == ["phase a", "phase b"]
    assert wall_cuts() == []  # the record ends with the solve


def test_a_grid_past_its_deadline_keeps_one_order_and_reports_the_cut() -> None:
    inst = Instance.from_problem(Problem(**BIG))

    @records_wall_cuts
    def run() -> tuple[int, list[str]]:
        return len(zb_candidates(inst, None, deadline=0.0)), wall_cuts()  # perf_counter() > 0 always

    count, cuts = run()
    assert count == 1 and cuts == ["zero-bubble grid"]


def test_a_local_search_past_its_deadline_changes_nothing_and_reports_the_cut() -> None:
    inst = Instance.from_problem(Problem(**BIG))
    inc = zb_candidates(inst, 0.0)[0]

    @records_wall_cuts
    def run() -> tuple[list, list[str]]:
        order, _ = polish(inst, inc.order, inc.start, max_trials=50, deadline=0.0)
        return order, wall_cuts()

    order, cuts = run()
    assert order == inc.order and cuts == ["local search"]
    assert polish(inst, inc.order, inc.start, max_trials=0, deadline=0.0)[0] == inc.order  # budget, not clock


def test_large_problems_give_the_grid_a_larger_share() -> None:
    small = Instance.from_problem(Problem(devices=4, microbatches=8))
    large = Instance.from_problem(Problem(devices=8, microbatches=FULL_MODEL_OPS // 24 + 1))
    assert large.num_ops > FULL_MODEL_OPS >= small.num_ops
    assert grid_share(small) == MODELLED.grid_share < HEURISTICS_ONLY.grid_share == grid_share(large)

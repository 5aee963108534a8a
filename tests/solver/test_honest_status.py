"""`optimal` rests only on a bound the search did not produce (issue 16 item 2): a bound handed to
finalize above the achieved objective is a bug and raises; a solver-supplied bound that meets the
objective (e.g. a Z >= cut read back) upgrades nothing; the closed-form bounds finalize computes
itself, or a solver's own proof (status passed as optimal), do."""

from __future__ import annotations

import pytest

from pipesched.solver import Instance, InvalidScheduleError, Problem, finalize, solve, validate
from pipesched.solver.bounds.combinatorial import combinatorial_bound
from pipesched.solver.core.tolerance import slack

#: GPipe here leaves a gap to every closed-form bound, so no cheap proof can call it optimal.
GAPPED = Problem(
    devices=4, microbatches=6,
    costs={"forward": 1.0, "backward_input": 1.0, "backward_weight": 1.0, "comm": 0.0},
    memory={"forward": 1.0, "backward_input": 0.0, "backward_weight": -1.0},
)


def _gpipe_times() -> tuple[Instance, dict, float]:
    inst = Instance.from_problem(GAPPED)
    schedule = solve(GAPPED, "gpipe")
    start = {o.id: o.start for o in schedule.ops}
    gap = schedule.objective_value - combinatorial_bound(inst)
    assert gap > slack(schedule.objective_value)  # the premise of the tests below
    return inst, start, schedule.objective_value


def test_a_bound_above_the_objective_raises_naming_method_bound_and_objective() -> None:
    inst, start, objective = _gpipe_times()
    with pytest.raises(InvalidScheduleError) as caught:
        finalize(GAPPED, "probe-method", start, lower_bound=objective + 1.0, inst=inst)
    text = str(caught.value)
    assert "probe-method" in text and repr(objective + 1.0) in text and repr(objective) in text


def test_a_bound_above_the_objective_by_float_noise_only_is_accepted() -> None:
    inst, start, objective = _gpipe_times()
    schedule = finalize(GAPPED, "probe", start, lower_bound=objective + slack(objective) / 2, inst=inst)
    assert schedule.lower_bound <= schedule.objective_value


def test_a_solver_bound_meeting_the_objective_does_not_make_it_optimal() -> None:
    inst, start, objective = _gpipe_times()
    schedule = finalize(GAPPED, "probe", start, lower_bound=objective, inst=inst)
    assert schedule.status == "feasible"
    assert schedule.lower_bound == objective  # reported, as the best bound held
    assert validate(schedule) == []


def test_a_solver_proof_passed_as_status_stays_optimal() -> None:
    inst, start, objective = _gpipe_times()
    schedule = finalize(GAPPED, "probe", start, status="optimal", inst=inst)
    assert schedule.status == "optimal" and schedule.lower_bound == objective


def test_the_closed_form_bound_alone_upgrades_a_schedule_that_meets_it() -> None:
    one = GAPPED.model_copy(update={"devices": 1})
    inst = Instance.from_problem(one)
    schedule = solve(one, "1f1b")  # one device, no idle time: the work bound meets it
    assert schedule.status == "optimal"
    assert abs(schedule.objective_value - combinatorial_bound(inst)) <= slack(schedule.objective_value)
    start = {o.id: o.start for o in schedule.ops}
    assert finalize(one, "probe", start, lower_bound=None, inst=inst).status == "optimal"


def test_a_recipe_is_optimal_only_when_a_closed_form_bound_meets_it() -> None:
    for name in ("gpipe", "1f1b", "zb-h1", "zb-h2"):
        schedule = solve(GAPPED, name)
        closed = combinatorial_bound(Instance.from_problem(GAPPED))
        met = schedule.objective_value - closed <= slack(schedule.objective_value)
        assert (schedule.status == "optimal") == met, name

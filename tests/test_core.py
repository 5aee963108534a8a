"""The canonical model, simulator and validator agree on small hand-checked cases."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pipesched.solver import DeadlockError, Instance, OpId, Problem, finalize, simulate, validate


def test_two_stage_gpipe_order_gets_hand_computed_times() -> None:
    problem = Problem(devices=2, microbatches=1, costs={"forward": 1, "backward_input": 2, "backward_weight": 3, "comm": 0.5})
    inst = Instance.from_problem(problem)
    order = [[OpId("F", 0, 0), OpId("B", 0, 0), OpId("W", 0, 0)], [OpId("F", 1, 0), OpId("B", 1, 0), OpId("W", 1, 0)]]
    start = simulate(inst, order)
    # F0 0-1, comm .5, F1 1.5-2.5, B1 2.5-4.5, comm .5, B0 5-7, W0 7-10; W1 4.5-7.5
    assert start == {OpId("F", 0, 0): 0.0, OpId("F", 1, 0): 1.5, OpId("B", 1, 0): 2.5, OpId("W", 1, 0): 4.5,
                     OpId("B", 0, 0): 5.0, OpId("W", 0, 0): 7.0}
    schedule = finalize(problem, "hand", start)
    assert schedule.makespan == 10.0
    assert schedule.peak_memory == [1.0, 1.0]
    assert validate(schedule) == []


def test_validator_reports_each_broken_rule() -> None:
    problem = Problem(devices=2, microbatches=1, memory={"limit": 0.5})
    inst = Instance.from_problem(problem)
    order = [[OpId("F", 0, 0), OpId("B", 0, 0), OpId("W", 0, 0)], [OpId("F", 1, 0), OpId("B", 1, 0), OpId("W", 1, 0)]]
    good = simulate(inst, order)
    with pytest.raises(RuntimeError, match="above its limit"):
        finalize(problem, "hand", good)
    bad = dict(good)
    bad[OpId("F", 1, 0)] = 0.0  # before its input arrives
    schedule = finalize(Problem(devices=2, microbatches=1), "hand", good).model_copy()
    ops = [o.model_copy(update={"start": 0.0, "end": 1.0}) if o.id == OpId("F", 1, 0) else o for o in schedule.ops]
    errors = validate(schedule.model_copy(update={"ops": ops}))
    assert any("F(stage 1, mb 0) starts at 0 but F(stage 0, mb 0) ends at 1" in e for e in errors)


def test_order_that_waits_on_itself_is_a_deadlock() -> None:
    inst = Instance.from_problem(Problem(devices=2, microbatches=1))
    order = [[OpId("B", 0, 0), OpId("F", 0, 0), OpId("W", 0, 0)], [OpId("F", 1, 0), OpId("B", 1, 0), OpId("W", 1, 0)]]
    with pytest.raises(DeadlockError, match="device 0 waits at B"):
        simulate(inst, order)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"devices": 0}, "devices must be >= 1"),
        ({"placement": "v"}, "placement 'v' needs stages_per_device = 2"),
        ({"costs": {"forward": [1, 2, 3]}}, "costs.forward has 3 entries"),
        ({"costs": {"comm": -1}}, "costs.comm must be >= 0"),
        ({"memory": {"backward_weight": -0.5}}, "memory deltas of stage 0 sum to 0.5"),
        ({"memory": {"limit": [1, 2, 3]}}, "memory.limit has 3 entries"),
        ({"microbatches": 10**9}, "microbatches must be <="),
    ],
)
def test_bad_problems_name_the_field(fields: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Problem.model_validate({"devices": 4, "microbatches": 8, **fields})

"""An F and a B of cost 0 at one instant, on a problem with F&B pairs (``costs.overlap_fb``), are two ops
run back to back in the order the method listed them, not a pair: the validator once read them as a
pair, walked memory F first and refused a valid schedule whose B had released its memory first (a
planned model with zero-cost layers made the service answer 500)."""

from __future__ import annotations

from pipesched.solver import Problem, SolveOptions, methods, solve
from pipesched.solver.core.errors import NotApplicableError
from pipesched.solver.core.instance import OpId
from pipesched.solver.timing.finalize import from_order
from pipesched.solver.timing.validate import validate

ZERO_FB = Problem(devices=1, microbatches=3,
                  costs={"forward": 0, "backward_input": 0, "backward_weight": 1, "overlap_fb": 0.7},
                  memory={"forward": 5, "backward_input": -4, "backward_weight": -1})


def _op(kind: str, i: int) -> OpId:
    return OpId(kind, 0, i)  # type: ignore[arg-type]


def test_a_b_then_an_f_at_one_instant_keep_their_order() -> None:
    order = [[_op("F", 0), _op("B", 0), _op("F", 1), _op("W", 0), _op("B", 1), _op("F", 2), _op("W", 1),
              _op("B", 2), _op("W", 2)]]
    schedule = from_order(ZERO_FB, "hand", order)  # raised InvalidScheduleError: peak 6 reported, 10 walked
    # B1 releases 4 before F2 takes 5: the level after W0 is 5, then 1, then 6
    assert schedule.peak_memory == [6.0]
    assert validate(schedule) == []


def test_every_method_gives_a_valid_schedule_with_zero_cost_pairs() -> None:
    for m in (2, 3):
        problem = ZERO_FB.model_copy(update={"microbatches": m})
        for method in methods():
            try:
                schedule = solve(problem, method.name, SolveOptions(time_limit_s=0.5))
            except NotApplicableError:
                continue
            assert validate(schedule) == [], method.name

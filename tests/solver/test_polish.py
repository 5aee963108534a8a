"""The W-delay local search: it removes delays an order imposed, never breaks memory, never worsens."""

from __future__ import annotations

import pytest

from pipesched.solver import Instance, Problem, solve, validate
from pipesched.solver.core.instance import OpId
from pipesched.solver.core.metrics import objective_value
from pipesched.solver.heuristics.swap_past_w import delayed_by_w, fits_memory, polish
from pipesched.solver.timing.finalize import finalize
from pipesched.solver.timing.retime import compact


def ops(text: str) -> list[OpId]:
    """``"F0.0 B0.1"`` -> [F(stage 0, mb 0), B(stage 0, mb 1)]."""
    out = []
    for tok in text.split():
        stage, mb = tok[1:].split(".")
        out.append(OpId(tok[0], int(stage), int(mb)))
    return out


def test_a_backward_waiting_for_a_w_jumps_ahead_and_the_makespan_drops_by_that_w() -> None:
    inst = Instance.from_problem(Problem(devices=2, microbatches=2,
                                         costs={"forward": 1, "backward_input": 1, "backward_weight": 2}))
    order = [ops("F0.0 F0.1 B0.0 W0.0 B0.1 W0.1"), ops("F1.0 B1.0 F1.1 W1.0 B1.1 W1.1")]
    before = compact(inst, order)
    assert (1, 3) in delayed_by_w(inst, order, before)  # W1.0 holds B1.1 back
    new_order, times = polish(inst, order, before)
    assert new_order[1] == ops("F1.0 B1.0 F1.1 B1.1 W1.0 W1.1")
    assert objective_value(inst, times) == objective_value(inst, before) - 1  # B0.1 now waits on W0.0 only
    assert validate(finalize(Problem(devices=2, microbatches=2, costs={"forward": 1, "backward_input": 1,
                                                                       "backward_weight": 2}),
                             "polish", times)) == []


def test_a_forward_never_jumps_a_w_whose_memory_it_needs() -> None:
    problem = Problem(devices=2, microbatches=3, memory={"limit": 2})
    inst = Instance.from_problem(problem)
    order = [ops("F0.0 F0.1 B0.0 W0.0 F0.2 B0.1 W0.1 B0.2 W0.2"),
             ops("F1.0 B1.0 W1.0 F1.1 B1.1 W1.1 F1.2 B1.2 W1.2")]
    times = compact(inst, order)
    assert (0, 3) in delayed_by_w(inst, order, times)  # F0.2 was ready long before W0.0 ended
    swapped = ops("F0.0 F0.1 B0.0 F0.2 W0.0 B0.1 W0.1 B0.2 W0.2")
    assert not fits_memory(inst, swapped, 0)
    new_order, new_times = polish(inst, order, times)
    assert all(fits_memory(inst, o, d) for d, o in enumerate(new_order))
    assert objective_value(inst, new_times) <= objective_value(inst, times)
    assert validate(finalize(problem, "polish", new_times)) == []


@pytest.mark.parametrize("method", ["1f1b", "zb-h1", "greedy"])
def test_polish_never_worsens_a_recipe_and_its_result_validates(method: str) -> None:
    problem = Problem(devices=4, microbatches=8, objective="stage_span", memory={"limit": 6},
                      costs={"forward": [1.0, 1.3, 0.9, 1.1], "backward_input": 1.2, "backward_weight": 0.7,
                             "comm": 0.1})
    inst = Instance.from_problem(problem)
    sched = solve(problem, method)
    start = {OpId(o.kind, o.stage, o.microbatch): o.start for o in sched.ops}
    order, times = polish(inst, sched.order(), start)
    assert objective_value(inst, times) <= sched.objective_value + 1e-9
    assert validate(finalize(problem, "polish", times)) == []

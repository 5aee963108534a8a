"""The validator recomputes the reported figures from the ops with its own arithmetic (issue 16 item 7):
a tampered makespan, objective, peak or bubble is rejected by name, and on every method's output the
validator's figures equal the ones core/metrics.py filled in."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipesched.solver import (
    Instance,
    NotApplicableError,
    Problem,
    SolveOptions,
    methods,
    solve,
    validate,
)
from pipesched.solver.core.metrics import (
    bubble_ratio,
    device_spans,
    makespan,
    objective_value,
    peak_memory,
)
from pipesched.solver.timing.figures import (
    ops_bubble,
    ops_makespan,
    ops_objective,
    ops_peaks,
    ops_spans,
)

BASIC = Problem(
    devices=3, microbatches=4,
    costs={"forward": 1.0, "backward_input": 1.5, "backward_weight": 0.5, "comm": 0.25},
    memory={"forward": 1.0, "backward_input": -0.5, "backward_weight": -0.5},
)


def test_tampered_figures_are_rejected_naming_the_figure() -> None:
    schedule = solve(BASIC, "1f1b")
    assert validate(schedule) == []
    tampered = {
        "makespan": {"makespan": schedule.makespan + 0.5},
        "objective_value": {"objective_value": schedule.objective_value - 0.5},
        "peak_memory": {"peak_memory": [x + 1.0 for x in schedule.peak_memory]},
        "bubble_ratio": {"bubble_ratio": schedule.bubble_ratio + 0.01},
    }
    for figure, change in tampered.items():
        errors = validate(schedule.model_copy(update=change))
        assert errors, figure
        assert all(figure in e for e in errors), (figure, errors)


def test_a_peak_lowered_on_one_device_is_rejected() -> None:
    schedule = solve(BASIC, "gpipe")
    peaks = list(schedule.peak_memory)
    peaks[0] -= 1.0
    assert any("peak_memory" in e for e in validate(schedule.model_copy(update={"peak_memory": peaks})))


@st.composite
def small_problems(draw: st.DrawFn) -> Problem:
    """Problems every exact method settles fast: p <= 3, m <= 3, loop or V, split or fused, both objectives."""
    p = draw(st.integers(1, 3))
    placement = draw(st.sampled_from(["loop", "v"]))
    v = 2 if placement == "v" else draw(st.integers(1, 2))
    costs = st.sampled_from([0.5, 1.0, 1.5, 2.0])
    share = draw(st.sampled_from([0.0, 0.5, 1.0]))  # of F's activation freed by B, the rest by W
    return Problem(
        devices=p, microbatches=draw(st.integers(1, 3)), stages_per_device=v, placement=placement,
        split_backward=draw(st.booleans()),
        costs={"forward": draw(costs), "backward_input": draw(costs), "backward_weight": draw(costs),
               "comm": draw(st.sampled_from([0.0, 0.25]))},
        memory={"forward": 1.0, "backward_input": -share, "backward_weight": share - 1.0},
        objective=draw(st.sampled_from(["makespan", "stage_span"])),
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_problems())
def test_every_methods_output_passes_and_its_figures_match_metrics(problem: Problem) -> None:
    inst = Instance.from_problem(problem)
    for method in methods():
        if method.applies(problem):
            continue
        try:
            schedule = solve(problem, method.name, SolveOptions(time_limit_s=2.0, workers=1))
        except NotApplicableError:
            continue
        if not schedule.ops:
            continue
        assert validate(schedule, inst) == [], method.name
        ops, start = schedule.ops, {o.id: o.start for o in schedule.ops}
        order = schedule.order()
        tol = 1e-7 * max(1.0, schedule.makespan)
        assert abs(ops_makespan(ops) - makespan(inst, start)) <= tol
        assert all(abs(a - b) <= tol for a, b in zip(ops_spans(ops, inst.devices), device_spans(inst, start),
                                                     strict=True))
        objective = ops_objective(ops, inst.devices, inst.objective)
        assert abs(objective - objective_value(inst, start)) <= tol
        assert ops_peaks(order, inst) == peak_memory(inst, order)
        assert abs(ops_bubble(ops, inst.devices, objective) - bubble_ratio(inst, objective)) <= 1e-7

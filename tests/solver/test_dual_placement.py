"""The dual placement (DualPipe's two copies, docs/dualpipe.md): problem fields, ops and dependencies,
validator, bounds against brute force, canonical key, and the methods that accept it."""

from __future__ import annotations

import random

import pytest
from bruteforce import optimum
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pipesched.solver import (
    Instance,
    NotApplicableError,
    OpId,
    Problem,
    SolveOptions,
    solve,
    validate,
)
from pipesched.solver.bounds.analytic import lower_bound
from pipesched.solver.bounds.combinatorial import combinatorial_bound
from pipesched.solver.bounds.feasibility import infeasibility_reason
from pipesched.solver.core.canonical import problem_key


def dual(p: int = 4, m: int = 8, **kw: object) -> Problem:
    return Problem(devices=p, microbatches=m, stages_per_device=2, placement="dual", **kw)


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        (dict(devices=3, microbatches=6, stages_per_device=2), "even number of devices"),
        (dict(devices=4, microbatches=6, stages_per_device=1), "stages_per_device = 2"),
        (dict(devices=4, microbatches=1, stages_per_device=2), "microbatches >= 2"),
        (dict(devices=4, microbatches=6, stages_per_device=2, dual_split=7), "dual_split must be in [0, microbatches = 6]"),
        (dict(devices=4, microbatches=6, stages_per_device=2, costs={"forward": [1.0] * 8}),
         "costs.forward has 8 entries but the dual placement's model has p = devices = 4 stages"),
    ],
)
def test_bad_dual_fields_are_refused_naming_the_field(fields: dict, needle: str) -> None:
    with pytest.raises(ValidationError, match=None) as err:
        Problem(placement="dual", **fields)
    assert needle in str(err.value)


def test_dual_split_without_dual_placement_is_refused() -> None:
    with pytest.raises(ValidationError, match="dual_split is only meaningful with placement 'dual'"):
        Problem(devices=4, microbatches=4, dual_split=2)


def test_each_microbatch_runs_through_one_copy_of_p_stages() -> None:
    inst = Instance.from_problem(dual(4, 6, costs={"forward": [1.0, 2.0, 3.0, 4.0]}))
    assert inst.device_of_stage == (0, 1, 2, 3, 3, 2, 1, 0)
    assert inst.duration["F"] == (1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0, 4.0)  # the up copy reads the model stage
    assert len(inst.ops()) == inst.num_ops == 3 * 4 * 6
    assert list(inst.microbatch_stages(2)) == [0, 1, 2, 3] and list(inst.microbatch_stages(3)) == [4, 5, 6, 7]
    assert inst.chain(3)[0] == OpId("F", 4, 3) and inst.chain(3)[4] == OpId("B", 7, 3)
    assert inst.predecessors(OpId("F", 4, 3)) == []  # the up copy's first stage, on device 3
    assert inst.predecessors(OpId("B", 3, 0)) == [(OpId("F", 3, 0), 0.0)]  # the down copy turns at p - 1
    assert inst.successors(OpId("B", 4, 3))[0][0] == OpId("W", 4, 3)  # nothing below the up copy's first stage
    assert not inst.has_op(OpId("F", 0, 3)) and not inst.has_op(OpId("F", 4, 0))


def test_split_moves_microbatches_between_directions() -> None:
    inst = Instance.from_problem(dual(2, 5, dual_split=1))
    assert list(inst.stage_microbatches(0)) == [0] and list(inst.stage_microbatches(2)) == [1, 2, 3, 4]
    # devices do equal work only for an even split
    assert inst.device_work() == [15.0, 15.0]


def test_canonical_key_resolves_the_default_split_and_differs_from_v() -> None:
    assert problem_key(dual(4, 8)) == problem_key(dual(4, 8, dual_split=4))
    assert problem_key(dual(4, 8)) != problem_key(dual(4, 8, dual_split=3))
    v = Problem(devices=4, microbatches=8, stages_per_device=2, placement="v")
    assert problem_key(dual(4, 8)) != problem_key(v)


def test_relative_limit_is_1f1b_worst_device_on_every_device() -> None:
    assert dual(4, 8, memory={"limit": "1x1f1b"}).memory.limit == [4.0] * 4


def test_validator_names_an_op_of_the_other_copy() -> None:
    problem = dual(2, 2)
    schedule = solve(problem, "gpipe")
    assert validate(schedule) == []
    ops = list(schedule.ops)
    k = next(n for n, o in enumerate(ops) if (o.kind, o.stage, o.microbatch) == ("F", 0, 0))
    ops[k] = ops[k].model_copy(update={"microbatch": 1})
    errors = validate(schedule.model_copy(update={"ops": ops}))
    assert any("does not run stage 0" in e for e in errors), errors


def test_single_microbatch_feasibility_takes_the_larger_direction() -> None:
    inst = Instance.from_problem(dual(2, 2, memory={"forward": [1.0, 3.0], "backward_weight": [-1.0, -3.0], "limit": 2}))
    reason = infeasibility_reason(inst)
    # device 0 holds model stage 0 (down) and model stage 1 (up copy): an upward microbatch needs 3 there
    assert reason is not None and "device 0" in reason and "at least 3" in reason


def _random_dual(rng: random.Random, objective: str) -> Problem:
    p, m = 2, rng.choice([2, 3])

    def costs() -> list[float]:
        return [rng.choice([0.5, 1.0, 2.0, 3.0]) for _ in range(p)]

    return dual(
        p, m, dual_split=rng.choice([None, 1, m - 1, m]), split_backward=rng.random() < 0.7, objective=objective,
        costs={"forward": costs(), "backward_input": costs(), "backward_weight": costs(),
               "comm": rng.choice([0.0, 0.5, 2.0])},
        memory={"limit": rng.choice([None, None, 1, 2])},
    )


@pytest.mark.parametrize("objective", ["makespan", "stage_span"])
def test_bounds_never_exceed_the_brute_force_optimum_on_tiny_dual_problems(objective: str) -> None:
    rng = random.Random(1414 + len(objective))
    checked = 0
    for _ in range(24):
        problem = _random_dual(rng, objective)
        best = optimum(problem)
        if best is None:
            continue
        inst = Instance.from_problem(problem)
        assert lower_bound(inst) <= best + 1e-9, problem.model_dump_json()
        assert combinatorial_bound(inst) <= best + 1e-9, problem.model_dump_json()
        checked += 1
    assert checked >= 12


@pytest.mark.parametrize("method", ["gpipe", "greedy", "cpsat", "ilp", "auto"])
@pytest.mark.parametrize("kw", [{}, {"memory": {"limit": 3}}, {"split_backward": False}, {"objective": "stage_span"},
                                {"dual_split": 1}])
def test_general_methods_schedule_dual_problems(method: str, kw: dict) -> None:
    problem = dual(4, 6, costs={"comm": 0.5}, **kw)
    if method == "gpipe" and "memory" in kw:  # gpipe holds every microbatch: it refuses the cap, naming it
        with pytest.raises(NotApplicableError, match="above memory.limit 3"):
            solve(problem, method, None)
    else:  # the exact methods stop at a short limit: only validity and the bound's side are checked here
        schedule = solve(problem, method, SolveOptions(time_limit_s=2.0) if method in ("cpsat", "ilp", "auto") else None)
        assert schedule.ops and validate(schedule) == []
        assert schedule.lower_bound is not None and schedule.lower_bound <= schedule.objective_value + 1e-9


@pytest.mark.parametrize("method", ["1f1b", "zb-h1", "interleaved-1f1b", "zb-v", "dualpipe-v", "looped-bfs"])
def test_recipes_of_other_placements_say_they_do_not_apply(method: str) -> None:
    with pytest.raises(NotApplicableError, match="does not apply"):
        solve(dual(4, 8), method)


def test_pipesched_methods_lists_dualpipe_and_looped_bfs() -> None:
    from pipesched.solver import methods

    names = [m.name for m in methods()]
    assert "dualpipe" in names and "looped-bfs" in names


def test_gantt_colours_by_direction_and_torch_csv_refuses_dual() -> None:
    from pipesched.solver.formats.render import render_svg
    from pipesched.solver.formats.torch_csv import to_torch_csv

    schedule = solve(dual(4, 8), "dualpipe")
    svg = render_svg(schedule)
    assert "full colour = down (microbatches 0..3), lighter = up" in svg
    assert 'class="o F0"' in svg and 'class="o F1"' in svg  # down stages full colour, up stages tinted
    with pytest.raises(NotApplicableError, match="torch has DualPipeV only"):
        to_torch_csv(schedule)


@st.composite
def dual_problems(draw: st.DrawFn) -> Problem:
    p = draw(st.sampled_from([2, 4]))
    m = draw(st.integers(2, 7))
    per_stage = st.lists(st.sampled_from([0.5, 1.0, 2.0]), min_size=p, max_size=p)
    split = draw(st.booleans())
    return dual(
        p, m, dual_split=draw(st.one_of(st.none(), st.integers(0, m))), split_backward=split,
        objective=draw(st.sampled_from(["makespan", "stage_span"])),
        costs={"forward": draw(per_stage), "backward_input": draw(per_stage), "backward_weight": draw(per_stage),
               "comm": draw(st.sampled_from([0.0, 0.3])), "overlap_fb": draw(st.sampled_from([None, 0.6, 1.0]))},
        memory={"limit": draw(st.sampled_from([None, 2.0, 3.0]))},
    )


@settings(max_examples=40, deadline=None)
@given(dual_problems())
def test_every_cheap_method_is_valid_on_dual_and_the_simulator_agrees_with_the_validator(problem: Problem) -> None:
    from pipesched.solver.timing.overlap import timed_pairs
    from pipesched.solver.timing.simulate import simulate

    inst = Instance.from_problem(problem)
    for name in ("greedy", "gpipe", "dualpipe", "auto"):
        try:
            schedule = solve(problem, name, None if name != "auto" else SolveOptions(time_limit_s=1.0))
        except NotApplicableError:
            continue  # a fixed recipe over the cap says so
        if not schedule.ops:
            continue
        assert validate(schedule) == [], name
        pairs = timed_pairs(schedule.ops, inst)
        times = simulate(inst, schedule.order(), pairs=pairs)
        assert all(times[o.id] <= o.start + 1e-9 for o in schedule.ops), name  # ASAP never later than the schedule


@pytest.mark.parametrize("objective", ["makespan", "stage_span"])
def test_cpsat_and_ilp_optima_on_tiny_dual_problems_are_the_brute_force_optima(objective: str) -> None:
    """The exact models' dual handling (per-copy symmetry breaking, first/last op per copy in the
    objective) proves nothing false: an ``optimal`` answer equals the brute-forced optimum."""
    rng = random.Random(77 + len(objective))
    proven = 0
    for _ in range(10):
        problem = _random_dual(rng, objective)
        best = optimum(problem)
        if best is None:
            continue
        for name in ("cpsat", "ilp"):
            schedule = solve(problem, name, SolveOptions(time_limit_s=5.0))
            assert schedule.objective_value is not None and schedule.objective_value >= best - 1e-6, name
            if schedule.status == "optimal":
                assert schedule.objective_value == pytest.approx(best, abs=1e-6), (name, problem.model_dump_json())
                proven += 1
    assert proven >= 8

"""The dualpipe recipe (DeepSeek's eight steps on the dual placement) and overlapped F&B pairs
(``costs.overlap_fb``): validity over a sweep, the step counts, pairs in the validator and simulator,
and the methods that take the pair-free route."""

from __future__ import annotations

import pytest
from requires import require

from pipesched.solver import Instance, NotApplicableError, OpId, Problem, solve, validate
from pipesched.solver.core.canonical import problem_key
from pipesched.solver.heuristics.classic.dualpipe import dualpipe_plan
from pipesched.solver.timing.overlap import timed_pairs


def dual(p: int, m: int, **kw: object) -> Problem:
    return Problem(devices=p, microbatches=m, stages_per_device=2, placement="dual", **kw)


@pytest.mark.parametrize("p", [2, 4, 6, 8])
@pytest.mark.parametrize("m", [2, 3, 5, 16, 21])
@pytest.mark.parametrize("split", [True, False])
@pytest.mark.parametrize("overlap", [None, 0.7])
def test_dualpipe_is_valid_for_every_m_split_and_overlap(p: int, m: int, split: bool, overlap: float | None) -> None:
    problem = dual(p, m, split_backward=split, costs={"forward": 1.0, "backward_input": 2.0, "backward_weight": 1.0,
                                                      "comm": 0.25, "overlap_fb": overlap})
    schedule = solve(problem, "dualpipe")
    assert validate(schedule) == []
    assert len(schedule.ops) == problem.num_ops


def test_an_uneven_split_is_trimmed_per_direction() -> None:
    schedule = solve(dual(4, 10, dual_split=3), "dualpipe")
    assert validate(schedule) == []
    assert {o.microbatch for o in schedule.ops if o.stage < 4} == {0, 1, 2}


@pytest.mark.parametrize("p", [4, 8])
def test_steps_have_the_reference_counts(p: int) -> None:
    """Per rank r (j = min(r, p-1-r), C = m/2): C forwards per chunk, and 2(C - p + j + 1) + (p/2 - j - 1)
    overlapped pairs, one fewer on the middle ranks (their first F0, B1 run apart)."""
    m = 3 * p
    inst = Instance.from_problem(dual(p, m, costs={"overlap_fb": 0.5}))
    order, pairs = dualpipe_plan(inst)
    half = p // 2
    for r, ops in enumerate(order):
        j = min(r, p - 1 - r)
        own = [f for f, _ in pairs if inst.device(f) == r]
        expected = 2 * (m // 2 - p + j + 1) + (half - j - 1) - (1 if j == half - 1 else 0)
        assert len(own) == expected, r
        assert sum(op.kind == "F" for op in ops) == m  # both chunks, C each
        first_b = next(k for k, op in enumerate(ops) if op.kind == "B")
        # steps 1 and 2 are forwards only; the middle ranks (no step 3) open step 4 with an F0
        assert first_b == 2 * (half - j - 1) + 2 * (j + 1) + (1 if j == half - 1 else 0)


def test_a_pair_is_one_op_starting_when_both_inputs_are_there() -> None:
    problem = dual(4, 8, costs={"forward": 1.0, "backward_input": 2.0, "backward_weight": 1.0, "overlap_fb": 0.6})
    schedule = solve(problem, "dualpipe")
    inst = Instance.from_problem(problem)
    pairs = timed_pairs(schedule.ops, inst)
    assert pairs  # steps 4 and 5 pair F and B
    by_id = {o.id: o for o in schedule.ops}
    for f, b in ((x, y) for x, y in pairs.items() if x.kind == "F"):
        assert by_id[f].start == by_id[b].start and by_id[f].end == by_id[b].end
        assert by_id[f].end - by_id[f].start == pytest.approx(max(1.0, 2.0, 0.6 * 3.0))
        assert by_id[f].device == by_id[b].device and f.microbatch != b.microbatch
    without = solve(dual(4, 8, costs={"forward": 1.0, "backward_input": 2.0, "backward_weight": 1.0}), "dualpipe")
    assert schedule.objective_value < without.objective_value  # 1.8 < 3 per pair


def test_validator_refuses_a_pair_of_the_wrong_length_and_pairs_without_overlap_fb() -> None:
    problem = dual(4, 8, costs={"overlap_fb": 0.75})
    schedule = solve(problem, "dualpipe")
    inst = Instance.from_problem(problem)
    f = next(x for x in timed_pairs(schedule.ops, inst) if x.kind == "F")
    ops = [o.model_copy(update={"end": o.end + 0.5}) if o.id == f else o for o in schedule.ops]
    assert any("lasts" in e for e in validate(schedule.model_copy(update={"ops": ops})))
    plain = dual(4, 8)  # the same ops under a problem with no overlap: the pairs overlap in time
    errors = validate(schedule.model_copy(update={"problem": plain}))
    assert any("while" in e or "lasts" in e for e in errors)


def test_overlap_fb_fields_are_checked_and_keyed() -> None:
    with pytest.raises(ValueError, match=r"costs.overlap_fb must be in \(0, 1\]") as err:
        dual(4, 8, costs={"overlap_fb": 1.5})
    assert str(err.value).count("must be in (0, 1]") == 1  # one number, one message (not one per stage)
    with pytest.raises(ValueError, match=r"costs.overlap_fb\[2\] must be in \(0, 1\], .*\(got 0\)"):
        dual(4, 8, costs={"overlap_fb": [0.5, 0.5, 0.0, 0.5]})
    with pytest.raises(ValueError, match="costs.overlap_fb has 8 entries"):
        dual(4, 8, costs={"overlap_fb": [0.5] * 8})
    assert problem_key(dual(4, 8)) != problem_key(dual(4, 8, costs={"overlap_fb": 0.5}))
    assert problem_key(dual(4, 8, costs={"overlap_fb": [0.5] * 4})) == problem_key(dual(4, 8, costs={"overlap_fb": 0.5}))


def test_ilp_says_it_does_not_pair_and_auto_and_cpsat_are_never_worse_than_dualpipe() -> None:
    problem = dual(4, 8, costs={"overlap_fb": 0.7})
    with pytest.raises(NotApplicableError, match="overlap_fb"):
        solve(problem, "ilp")
    recipe = solve(problem, "dualpipe")
    paired = solve(problem, "cpsat")  # the paired model (tests/solver/test_overlap_exact.py)
    assert validate(paired) == [] and paired.objective_value <= recipe.objective_value
    auto = solve(problem, "auto")
    assert validate(auto) == [] and auto.objective_value <= recipe.objective_value
    assert auto.lower_bound is not None and auto.lower_bound <= auto.objective_value


@pytest.mark.parametrize("kw", [{}, {"memory": {"limit": 6}}, {"objective": "stage_span"}, {"split_backward": False}])
def test_auto_and_cpsat_are_never_worse_than_dualpipe_on_dual(kw: dict) -> None:
    from pipesched.solver import SolveOptions

    problem = dual(4, 8, costs={"forward": 1.0, "backward_input": 2.0, "backward_weight": 1.0, "comm": 0.5}, **kw)
    recipe = solve(problem, "dualpipe")
    for name in ("auto", "cpsat"):
        got = solve(problem, name, SolveOptions(time_limit_s=4))
        assert validate(got) == [] and got.objective_value <= recipe.objective_value + 1e-9, name
        assert got.lower_bound is not None and got.lower_bound <= got.objective_value


def test_op_ids_of_the_up_stream_are_its_copy() -> None:
    order, _ = dualpipe_plan(Instance.from_problem(dual(4, 8)))
    assert order[3][0] == OpId("F", 4, 4)  # device p-1 starts the upward stream at its copy's first stage
    assert order[0][0] == OpId("F", 0, 0)


def test_dualpipe_v_pairs_export_as_torch_overlap_f_b_actions() -> None:
    from pipesched.solver.formats.torch_csv import to_torch_csv

    problem = Problem(devices=2, microbatches=4, stages_per_device=2, placement="v", costs={"overlap_fb": 0.6})
    schedule = solve(problem, "dualpipe-v")
    assert validate(schedule) == []
    plain = solve(Problem(devices=2, microbatches=4, stages_per_device=2, placement="v"), "dualpipe-v")
    assert schedule.objective_value < plain.objective_value
    rows = [row.split(",") for row in to_torch_csv(schedule).split()]
    assert "(0F3;3I1)OVERLAP_F_B" in rows[0]
    assert sum(len(row) for row in rows) == len(schedule.ops) - len(timed_pairs(schedule.ops, Instance.from_problem(
        problem))) // 2  # a pair is one action
    schedules = require("torch.distributed.pipelining.schedules")
    action = schedules._Action.from_str("(0F3;3I1)OVERLAP_F_B")
    assert action.computation_type == schedules.OVERLAP_F_B and [str(a) for a in action.sub_actions] == ["0F3", "3I1"]


def test_gantt_draws_a_pair_as_one_box_f_above_b() -> None:
    from pipesched.solver.formats.render import ROW_HEIGHT, render_svg

    svg = render_svg(solve(dual(4, 8, costs={"overlap_fb": 0.7}), "dualpipe"))
    half = f"{ROW_HEIGHT / 2:g}"
    assert f'y="0" height="{half}" class="o F' in svg and f'y="{half}" height="{half}" class="o B' in svg
    assert "overlapped with" in svg
    plain = render_svg(solve(dual(4, 8), "dualpipe"))
    assert f'height="{half}"' not in plain

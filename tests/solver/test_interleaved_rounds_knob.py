"""The depth/breadth knob of interleaved 1F1B (``interleaved_order(inst, per_round=g)``, issue 14 item 3):
deadlock-free and valid for every g in [p, m]; g = p is the ``interleaved-1f1b`` recipe; g = m runs the
forwards in ``looped-bfs``'s breadth-first order; memory grows with g, never beyond ``looped-bfs``'s;
and for g dividing m the makespan is the interleaved closed form whatever g."""

from __future__ import annotations

import pytest

from pipesched.solver import Instance, Problem, solve, validate
from pipesched.solver.heuristics.classic.interleaved import interleaved_order
from pipesched.solver.heuristics.classic.looped_bfs import looped_bfs_order
from pipesched.solver.timing.finalize import from_order


def problem(p: int, m: int, v: int, split: bool, f: float = 1.0, b: float = 2.0, w: float = 0.5) -> Problem:
    memory = {"forward": 1.0, "backward_input": 0.0 if split else -1.0, "backward_weight": -1.0 if split else 0.0}
    return Problem(devices=p, microbatches=m, stages_per_device=v, split_backward=split,
                   costs={"forward": f, "backward_input": b, "backward_weight": w}, memory=memory)


SWEEP = [(p, m, v) for p in (1, 2, 3, 4) for m in (1, 2, 3, 5, 6, 8) for v in (2, 3)]


@pytest.mark.parametrize("split", [True, False])
@pytest.mark.parametrize(("p", "m", "v"), SWEEP)
def test_every_round_size_is_valid_and_memory_grows_with_it_up_to_looped_bfs(p: int, m: int, v: int,
                                                                            split: bool) -> None:
    pr = problem(p, m, v, split)
    inst = Instance.from_problem(pr)
    bfs_peak = max(from_order(pr, "looped-bfs", looped_bfs_order(inst), inst=inst).peak_memory)
    peaks = []
    for g in range(p, max(p, m) + 1):
        schedule = from_order(pr, "interleaved-1f1b", interleaved_order(inst, per_round=g), inst=inst)
        assert validate(schedule) == []
        peaks.append(max(schedule.peak_memory))
    assert peaks == sorted(peaks)
    assert peaks[-1] <= bfs_peak


@pytest.mark.parametrize("split", [True, False])
@pytest.mark.parametrize(("p", "m", "v"), [(2, 4, 2), (3, 5, 3), (4, 8, 2), (4, 3, 3)])
def test_depth_first_end_is_the_interleaved_1f1b_recipe(p: int, m: int, v: int, split: bool) -> None:
    pr = problem(p, m, v, split)
    inst = Instance.from_problem(pr)
    recipe = solve(pr, "interleaved-1f1b")
    knob = from_order(pr, "interleaved-1f1b", interleaved_order(inst, per_round=p), inst=inst)
    assert knob.ops == recipe.ops


@pytest.mark.parametrize("split", [True, False])
@pytest.mark.parametrize(("p", "m", "v"), [(2, 4, 2), (3, 5, 3), (4, 8, 2), (2, 6, 3)])
def test_breadth_first_end_runs_the_forwards_in_looped_bfs_order(p: int, m: int, v: int, split: bool) -> None:
    inst = Instance.from_problem(problem(p, m, v, split))
    knob, bfs = interleaved_order(inst, per_round=m), looped_bfs_order(inst)
    for ours, theirs in zip(knob, bfs, strict=True):
        assert [op for op in ours if op.kind == "F"] == [op for op in theirs if op.kind == "F"]
    depth = interleaved_order(inst, per_round=p)
    assert any([op for op in a if op.kind == "F"] != [op for op in b if op.kind == "F"]
               for a, b in zip(depth, bfs, strict=True))  # the depth end does not (m > p here)


@pytest.mark.parametrize(("p", "m", "v"), [(2, 4, 2), (2, 6, 3), (3, 6, 2), (4, 8, 3), (2, 8, 2)])
def test_makespan_is_the_closed_form_for_every_round_size_dividing_m(p: int, m: int, v: int) -> None:
    # Fused backward, uniform costs, comm 0: m v (f + b) + (p - 1)(f + b) (module docstring of
    # interleaved.py) holds for every g with p <= g and g | m: the round size trades memory, not time.
    f, b, w = 1.0, 2.0, 0.5
    pr = problem(p, m, v, False, f, b, w)
    inst = Instance.from_problem(pr)
    sizes = [g for g in range(p, m + 1) if m % g == 0]
    assert len(sizes) >= 2
    for g in sizes:
        got = from_order(pr, "interleaved-1f1b", interleaved_order(inst, per_round=g), inst=inst).makespan
        assert got == pytest.approx(m * v * (f + b + w) + (p - 1) * (f + b + w)), g


@pytest.mark.parametrize("g", [1, 9])
def test_round_sizes_outside_p_to_m_are_refused_by_name(g: int) -> None:
    inst = Instance.from_problem(problem(2, 8, 2, True))
    with pytest.raises(ValueError, match=r"per_round must be in \[p, m\] = \[2, 8\]"):
        interleaved_order(inst, per_round=g)

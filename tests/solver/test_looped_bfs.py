"""looped-bfs: valid over a sweep, torch 2.13's ScheduleLoopedBFS per-rank order, closed-form makespan."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from requires import require

from pipesched.cli import main
from pipesched.solver import Instance, NotApplicableError, Problem, solve, validate
from pipesched.solver.heuristics.classic.looped_bfs import looped_bfs_order


def problem(p: int, m: int, v: int, split: bool, f: float = 1.0, b: float = 2.0, w: float = 0.5) -> Problem:
    return Problem(
        devices=p,
        microbatches=m,
        stages_per_device=v,
        split_backward=split,
        costs={"forward": f, "backward_input": b, "backward_weight": w},
    )


SWEEP = [(p, m, v) for p in (1, 2, 3, 4) for m in (1, 2, 3, 5, 8) for v in (2, 3)]


@pytest.mark.parametrize("split", [True, False])
@pytest.mark.parametrize(("p", "m", "v"), SWEEP)
def test_looped_bfs_is_valid_for_every_m_and_backward(p: int, m: int, v: int, split: bool) -> None:
    schedule = solve(problem(p, m, v, split), "looped-bfs")
    assert schedule.status in ("feasible", "optimal")  # optimal when it meets the lower bound
    assert validate(schedule) == []
    kinds = {op.kind for op in schedule.ops}
    assert kinds == ({"F", "B", "W"} if split else {"F", "B"})


@pytest.mark.parametrize(("p", "m", "v"), [(2, 4, 2), (4, 8, 2), (3, 5, 3), (4, 3, 4)])
def test_looped_bfs_order_is_torchs_schedule_looped_bfs(p: int, m: int, v: int) -> None:
    # torch's per-rank compute order, built by its own planning function without running anything
    # (no process group, no stages: it reads only the three attributes given here).
    schedules = require("torch.distributed.pipelining.schedules")
    fake = SimpleNamespace(_stages=[None] * v, pp_group_size=p, _n_microbatches=m)
    kind = {schedules._ComputationType.FORWARD: "F", schedules._ComputationType.FULL_BACKWARD: "B"}
    ours = looped_bfs_order(Instance.from_problem(problem(p, m, v, split=False)))
    for rank in range(p):
        actions = schedules.ScheduleLoopedBFS._calculate_single_rank_operations(fake, rank)
        theirs = [(kind[a.computation_type], a.stage_index, a.microbatch_index) for a in actions if a is not None]
        assert [(op.kind, op.stage, op.microbatch) for op in ours[rank]] == theirs


@pytest.mark.parametrize(("p", "m", "v"), [(p, m, v) for p, m, v in SWEEP if m >= p] + [(4, 12, 3), (6, 6, 2)])
def test_looped_bfs_makespan_closed_form(p: int, m: int, v: int) -> None:
    # (v m + p - 1) f + (p - 1) b + v m (b + w) for m >= p, comm 0 (derivation in the module docstring);
    # a fused backward is the same with b + w in one op: (v m + p - 1)(f + b + w).
    f, b, w = 1.0, 2.0, 0.5
    split = solve(problem(p, m, v, True, f, b, w), "looped-bfs")
    assert split.makespan == pytest.approx((v * m + p - 1) * f + (p - 1) * b + v * m * (b + w))
    fused = solve(problem(p, m, v, False, f, b, w), "looped-bfs")
    assert fused.makespan == pytest.approx((v * m + p - 1) * (f + b + w))


def test_looped_bfs_when_m_below_p_waits_longer_than_the_closed_form() -> None:
    # The closed form needs m >= p: with fewer microbatches device 0 idles between chunks.
    p, m, v, f, b, w = 4, 2, 2, 1.0, 2.0, 0.5
    got = solve(problem(p, m, v, True, f, b, w), "looped-bfs").makespan
    assert got > (v * m + p - 1) * f + (p - 1) * b + v * m * (b + w)


@pytest.mark.parametrize("fields", [{"stages_per_device": 1}, {"stages_per_device": 2, "placement": "v"}])
def test_looped_bfs_needs_loop_placement_with_two_chunks(fields: dict[str, object]) -> None:
    with pytest.raises(NotApplicableError, match="looped-bfs needs placement 'loop'"):
        solve(Problem(devices=2, microbatches=4, **fields), "looped-bfs")


def test_pipesched_methods_lists_looped_bfs_with_when_it_applies(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["methods"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("looped-bfs ")]
    assert len(lines) == 1 and "stages_per_device >= 2" in lines[0]

"""Failures are exceptions that name the rank and op, raised within the timeout, never hangs."""

from __future__ import annotations

import os
import time

import pytest
import torch
from runtime_limits import GROUP_TIMEOUT_S

from pipesched.runtime.errors import PipelineError, PipelineTimeoutError, ScheduleMismatchError
from pipesched.runtime.launch import run_ranks
from pipesched.runtime.model import mlp_stages, sample_batch
from pipesched.runtime.replay.executor import check_schedule
from pipesched.solver import Problem, Schedule, no_schedule, solve

WAIT_S = 1.0


def _schedule(method: str = "1f1b", devices: int = 2) -> Schedule:
    return solve(Problem(devices=devices, microbatches=2), method)


def test_a_schedule_for_another_world_size_is_rejected_naming_the_rank() -> None:
    with pytest.raises(ScheduleMismatchError, match=r"rank 1: the schedule is for 2 devices but the process group has 3"):
        check_schedule(_schedule(), rank=1, world=3, stages={1: torch.nn.Identity()})


def test_missing_and_foreign_stage_modules_are_named() -> None:
    with pytest.raises(ScheduleMismatchError, match=r"rank 0: .*no module was given for stage\(s\) \[0\]"):
        check_schedule(_schedule(), rank=0, world=2, stages={})
    with pytest.raises(ScheduleMismatchError, match=r"rank 0: modules given for stage\(s\) \[1\]"):
        check_schedule(_schedule(), rank=0, world=2, stages={0: torch.nn.Identity(), 1: torch.nn.Identity()})


def test_a_schedule_whose_order_breaks_a_dependency_is_rejected_before_any_communication() -> None:
    schedule = _schedule()
    # move device 1's first op (F(1,0)) to run before device 0 produced its input
    ops = [o.model_copy(update={"start": o.start - 1.0, "end": o.end - 1.0}) if (o.device, o.kind, o.microbatch) == (1, "F", 0)
           else o for o in schedule.ops]
    broken = schedule.model_copy(update={"ops": ops})
    with pytest.raises(ScheduleMismatchError, match="rank 1: invalid schedule"):
        check_schedule(broken, rank=1, world=2, stages={1: torch.nn.Identity()})


def test_a_schedule_without_ops_is_rejected_with_its_reason() -> None:
    empty = no_schedule(Problem(devices=2, microbatches=2), "cpsat", "infeasible", "memory.limit too small")
    with pytest.raises(ScheduleMismatchError, match="memory.limit too small"):
        check_schedule(empty, rank=0, world=2, stages={0: torch.nn.Identity()})


def failing_rank(rank: int, world: int, mode: str) -> str:
    from pipesched.runtime.replay.executor import PipelineExecutor

    schedule = _schedule("1f1b")
    if mode == "mismatch" and rank == 1:  # rank 1 replays an inconsistent plan: 4 microbatches, not 2
        schedule = solve(Problem(devices=2, microbatches=4), "1f1b")
    ex = PipelineExecutor(schedule, {rank: mlp_stages(2)[rank]}, torch.nn.functional.mse_loss, timeout_s=WAIT_S)
    if rank == 1 and mode == "dies":
        os._exit(3)
    if rank == 1 and mode == "stuck":
        time.sleep(2 * WAIT_S)
        return "slept"
    x, y = sample_batch(4)
    t0 = time.perf_counter()
    try:
        ex.step(x, y)
    except PipelineError as e:
        return f"{type(e).__name__} after {time.perf_counter() - t0:.1f}s: {e}"
    return "no error"


@pytest.mark.parametrize("mode", ["stuck", "dies", "mismatch"])
def test_a_stuck_dead_or_inconsistent_peer_raises_naming_rank_and_op_within_the_timeout(mode: str) -> None:
    results = run_ranks(failing_rank, 2, mode, timeout_s=GROUP_TIMEOUT_S, check=False)
    errors = [r for r in results if str(r.value).startswith(("PipelineTimeoutError", "PipelineError"))]
    assert errors, [r.value for r in results]
    for r in errors:
        text = r.value
        assert f"rank {r.rank}" in text and "stage" in text and f"rank {1 - r.rank}" in text, text
    if mode == "stuck":
        assert results[0].value.startswith(PipelineTimeoutError.__name__), results[0].value
        assert "timed out after 1 s" in results[0].value
    if mode == "dies":
        assert results[0] in errors
        assert results[1].value == "exited with code 3 without reporting"

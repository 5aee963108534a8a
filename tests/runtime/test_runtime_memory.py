"""Activations are freed after their last consumer, so live memory follows the schedule's model.

Each rank counts the bytes autograd saves (a saved-tensor hook whose holders decrement a counter
when freed). With the problem's default memory model (F +1, B 0, W -1 per microbatch) the peak,
in microbatches, must match the schedule's ``peak_memory`` for that device (B may free a little
early, never late), and nothing may be left alive after the step.
"""

from __future__ import annotations

import pytest
import torch
from runtime_limits import GROUP_TIMEOUT_S

from pipesched.runtime.launch import run_ranks
from pipesched.runtime.model import mlp_stages, sample_batch
from pipesched.solver import Problem, Schedule, solve

METHODS = ["gpipe", "1f1b", "zb-h1"]


class _Live:
    bytes = 0
    peak = 0


class _Holder:
    def __init__(self, t: torch.Tensor) -> None:
        self.t = t.detach()  # holding t itself would tie a saved output to its own graph (a cycle)
        self.n = t.numel() * t.element_size()
        _Live.bytes += self.n
        _Live.peak = max(_Live.peak, _Live.bytes)

    def __del__(self) -> None:
        _Live.bytes -= self.n


def memory_rank(rank: int, world: int, schedules: list[str]) -> list[dict]:
    from pipesched.runtime.replay.executor import PipelineExecutor

    out = []
    for text in schedules:
        schedule = Schedule.model_validate_json(text)
        stages = mlp_stages(schedule.problem.num_stages)
        mine = {rank: stages[rank]}
        ex = PipelineExecutor(schedule, mine, torch.nn.functional.mse_loss, timeout_s=20)
        x, y = sample_batch(8)
        ex.step(x, y)  # first step agrees shapes
        # one microbatch's saved bytes on this stage (the unit of the schedule's memory model)
        _Live.bytes = _Live.peak = 0
        with torch.autograd.graph.saved_tensors_hooks(_Holder, lambda h: h.t):
            xi = x[:2] if rank == 0 else torch.randn(2, 16, requires_grad=True)
            held = stages[rank](xi)
            if rank == schedule.problem.num_stages - 1:  # the loss belongs to the last stage's F
                held = torch.nn.functional.mse_loss(held, y[:2])
            unit = _Live.bytes
            del held, xi
            _Live.bytes = _Live.peak = 0
            ex.step(x, y)
        out.append({"peak": _Live.peak / unit, "left": _Live.bytes})
    return out


@pytest.fixture(scope="module")
def measured() -> tuple[list[Schedule], list[list[dict]]]:
    schedules = [solve(Problem(devices=2, microbatches=4), m) for m in METHODS]
    results = run_ranks(memory_rank, 2, [s.model_dump_json() for s in schedules], timeout_s=GROUP_TIMEOUT_S)
    return schedules, [r.value for r in results]


@pytest.mark.parametrize("case", range(len(METHODS)), ids=METHODS)
def test_live_activations_peak_as_the_schedule_predicts_and_are_all_freed(measured, case: int) -> None:
    schedules, per_rank = measured
    for rank, results in enumerate(per_rank):
        got = results[case]
        assert got["left"] == 0, f"rank {rank}: {got['left']} saved bytes still alive after the step"
        # B already frees the few saved tensors only B needs (the loss's), hence "slightly below";
        # a microbatch kept one op too long would add a whole unit
        model = schedules[case].peak_memory[rank]
        assert model - 0.1 <= got["peak"] <= model + 1e-9, (rank, got, model)

"""Recomputed stages (a plan's activation checkpointing) replay gradient-exact and hold less.

A recomputed stage's F keeps only its input; its B runs the forward again (under F's random state)
before the backward. Each rank counts the bytes autograd saves (a saved-tensor hook whose holders
decrement a counter when freed) over one step, with and without recompute: GPipe runs every F
before any B, so without recompute a rank holds all m microbatches' activations at once, with
recompute only the one its B is re-running.
"""

from __future__ import annotations

import pytest
import torch
from runtime_limits import GROUP_TIMEOUT_S

from pipesched.runtime.launch import run_ranks
from pipesched.runtime.model import mlp_stages, reference_grads, sample_batch
from pipesched.runtime.replay.recompute import forward_again, forward_without_graph
from pipesched.solver import Problem, Schedule, solve

M = 4
BATCH = 9  # uneven microbatches: the loss scaling is replayed too
CASES = [("gpipe", False), ("gpipe", True), ("zb-h1", True), ("1f1b", False)]  # (method, split backward)
TOLERANCE = 1e-5


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


def recompute_rank(rank: int, world: int, schedules: list[str]) -> list[dict]:
    """Per schedule: the peak saved bytes of a step without and with recompute of this rank's
    stage, and the gradients of the recomputed run."""
    from pipesched.runtime.replay.executor import PipelineExecutor

    out = []
    x, y = sample_batch(BATCH)
    for text in schedules:
        schedule = Schedule.model_validate_json(text)
        got: dict = {}
        for recompute in (False, True):
            stages = mlp_stages(schedule.problem.num_stages)
            mine = {rank: stages[rank]}
            ex = PipelineExecutor(schedule, mine, torch.nn.functional.mse_loss, timeout_s=20,
                                  recompute=[rank] if recompute else [])
            ex.step(x, y)  # the first step agrees shapes
            mine[rank].zero_grad(set_to_none=True)
            _Live.bytes = _Live.peak = 0
            with torch.autograd.graph.saved_tensors_hooks(_Holder, lambda h: h.t):
                ex.step(x, y)
            got["with" if recompute else "without"] = (_Live.peak, _Live.bytes)
            if recompute:
                got["grads"] = {f"{rank}.{n}": p.grad.clone() for n, p in mine[rank].named_parameters()}
        out.append(got)
    return out


@pytest.fixture(scope="module")
def measured() -> list[list[dict]]:
    schedules = [solve(Problem(devices=2, microbatches=M, split_backward=split), m).model_dump_json()
                 for m, split in CASES]
    return [r.value for r in run_ranks(recompute_rank, 2, schedules, timeout_s=GROUP_TIMEOUT_S)]


@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{m}-{'split' if s else 'fused'}" for m, s in CASES])
def test_recomputed_stages_give_the_full_batch_gradients(measured: list[list[dict]], case: int) -> None:
    ref = reference_grads(mlp_stages(2), *sample_batch(BATCH))
    got = {k: g for rank in measured for k, g in rank[case]["grads"].items()}
    assert set(got) == set(ref)
    diff = max(float((got[k] - ref[k]).abs().max()) for k in ref)
    assert diff <= TOLERANCE, f"{CASES[case]}: max grad diff {diff:g}"


@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{m}-{'split' if s else 'fused'}" for m, s in CASES])
def test_recompute_lowers_the_peak_of_saved_bytes_and_frees_everything(measured: list[list[dict]], case: int) -> None:
    method, split = CASES[case]
    for rank, results in enumerate(measured):
        (peak_off, left_off), (peak_on, left_on) = results[case]["without"], results[case]["with"]
        assert left_off == 0 and left_on == 0, (rank, results[case])
        assert peak_on <= peak_off, (rank, method, peak_on, peak_off)
        if rank == 0:  # the first stage holds several microbatches between F and B; the last runs B at once
            assert peak_on < peak_off, (rank, method, peak_on, peak_off)
        if method == "gpipe" and not split:
            # every F before any B: all microbatches held without recompute, one (B's re-run) with it,
            # at most the largest (3 of the batch's 9 rows)
            assert peak_on * BATCH <= 3 * peak_off, (rank, peak_on, peak_off)


def test_the_rerun_sees_the_random_stream_of_the_forward_it_replaces() -> None:
    """With dropout, B's re-run must draw F's masks (else the gradients are of another function),
    and the caller's random stream must go on as if no re-run happened."""
    torch.manual_seed(3)
    layer = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 2))
    x = torch.randn(5, 8, requires_grad=True)
    state = torch.get_rng_state()
    expected = layer(x)
    expected.sum().backward()
    want = [p.grad.clone() for p in layer.parameters()]
    layer.zero_grad()

    torch.set_rng_state(state)
    y0, replay = forward_without_graph(layer, x)
    assert not y0.requires_grad and torch.equal(y0, expected.detach())
    torch.rand(100)  # other work between F and B moves the stream on
    between = torch.get_rng_state()
    y = forward_again(layer, x, replay)
    assert torch.equal(y, expected)
    after = torch.rand(1)
    torch.set_rng_state(between)
    assert torch.equal(torch.rand(1), after)  # the re-run left the caller's stream where it was
    y.sum().backward()
    assert all(torch.equal(a, p.grad) for a, p in zip(want, layer.parameters(), strict=True))

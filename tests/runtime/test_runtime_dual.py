"""Dual placement (DualPipe) on gloo ranks: twin stage modules on ranks r and p−1−r, the first half
of the microbatches flowing 0 → p−1 and the rest p−1 → 0, and the twins' weight gradients summed
after the step, give the single-process full-batch gradients on every rank."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest
import torch
from runtime_limits import GROUP_TIMEOUT_S

from pipesched.runtime.check import grad_diff, replay_rank
from pipesched.runtime.launch import run_ranks
from pipesched.solver import Problem, Schedule, solve

TOLERANCE = 1e-5


def _twin_rank(rank: int, world: int) -> dict:
    """Two ranks holding model stages 0 (a Linear(3, 2)) and 1 (a Linear(1, 1)) under stage ids
    0, 3 (rank 0) and 2, 1 (rank 1); model stage 0 gets different gradients on each rank, on top of
    gradients already accumulated before the step."""
    from pipesched.runtime.replay.twins import TwinSum

    torch.manual_seed(0)
    a, b = torch.nn.Linear(3, 2), torch.nn.Linear(1, 1, bias=False)
    a.weight.grad = torch.full_like(a.weight, 10.0)  # accumulated before: not exchanged
    twins = TwinSum({0: a, 3: b} if rank == 0 else {1: b, 2: a}, world, rank, None, 20)
    twins.start()
    a(torch.full((1, 3), float(rank + 1))).sum().backward()
    twins.finish()
    return {"weight": a.weight.grad.clone(), "bias": a.bias.grad.clone(), "b": b.weight.grad.clone()}


def test_twins_end_with_the_sum_of_their_step_gradients_on_top_of_what_each_had() -> None:
    a, b = (r.value for r in run_ranks(_twin_rank, 2, timeout_s=GROUP_TIMEOUT_S))
    # the step's weight gradients are inputs 1 and 2 per output row: summed 3, on top of 10
    assert torch.equal(a["weight"], torch.full((2, 3), 13.0)) and torch.equal(b["weight"], a["weight"])
    # the bias had no gradient before: the sum alone, 1 + 1
    assert torch.equal(a["bias"], torch.full((2,), 2.0)) and torch.equal(b["bias"], a["bias"])
    assert torch.equal(a["b"], torch.zeros(1, 1)) and torch.equal(b["b"], a["b"])  # unused: zeros on both


def _dual(p: int, m: int, method: str, split_backward: bool = True, dual_split: int | None = None,
          overlap_fb: float | None = None) -> Schedule:
    extra: dict = {} if dual_split is None else {"dual_split": dual_split}
    if overlap_fb is not None:
        extra["costs"] = {"overlap_fb": overlap_fb}
    problem = Problem(devices=p, microbatches=m, stages_per_device=2, placement="dual",
                      split_backward=split_backward, **extra)
    return solve(problem, method)


# (world, schedule): the recipe with and without F&B pairs, split and fused, the default split and
# uneven ones (1 of 4 down; all up)
CASES = {
    2: [("dualpipe", _dual(2, 4, "dualpipe")), ("dualpipe-overlap", _dual(2, 4, "dualpipe", overlap_fb=0.6)),
        ("gpipe", _dual(2, 4, "gpipe")), ("greedy", _dual(2, 4, "greedy")),
        ("greedy-fused", _dual(2, 4, "greedy", split_backward=False)),
        ("greedy-split-1", _dual(2, 4, "greedy", dual_split=1)), ("gpipe-all-up", _dual(2, 4, "gpipe", dual_split=0))],
    4: [("dualpipe", _dual(4, 8, "dualpipe")), ("dualpipe-overlap", _dual(4, 8, "dualpipe", overlap_fb=0.7)),
        ("greedy", _dual(4, 8, "greedy")), ("gpipe-split-3", _dual(4, 6, "gpipe", dual_split=3))],
}
BATCH = 2 * 8 + 1  # uneven microbatches: the loss scaling is replayed too


@pytest.fixture(scope="module", params=sorted(CASES))
def replayed(request: pytest.FixtureRequest) -> tuple[int, list[list[dict]]]:
    world = request.param
    texts = [s.model_dump_json() for _, s in CASES[world]]
    return world, [r.value for r in run_ranks(replay_rank, world, texts, BATCH, 2, timeout_s=GROUP_TIMEOUT_S)]


def test_every_twin_holds_the_full_batch_gradients(replayed: tuple[int, list[list[dict]]]) -> None:
    world, per_rank = replayed
    for j, (name, schedule) in enumerate(CASES[world]):
        results = [rank[j] for rank in per_rank]
        # every parameter of the model is reported twice, once per twin
        counts = Counter(k for r in results for k in r["grads"])
        assert set(counts.values()) == {2}, counts
        diff = grad_diff(schedule, results, BATCH)
        assert diff <= TOLERANCE, f"p={world} {name}: max grad diff {diff:g}"


def _without_sum_rank(rank: int, world: int, text: str) -> dict:
    """The same replay with the twin sum switched off: the control that shows the sum matters."""
    from pipesched.runtime.check import _my_modules
    from pipesched.runtime.model import sample_batch
    from pipesched.runtime.replay.executor import PipelineExecutor

    schedule = Schedule.model_validate_json(text)
    mine = _my_modules(schedule, rank)
    ex = PipelineExecutor(schedule, mine, torch.nn.functional.mse_loss, timeout_s=20)
    ex.twins = None
    ex.step(*sample_batch(BATCH))
    return {"grads": {f"{s % world}.{n}": w.grad.clone() for s, m in mine.items() for n, w in m.named_parameters()}}


def test_without_the_twin_sum_each_twin_holds_only_its_half() -> None:
    schedule = _dual(2, 4, "gpipe")
    per_rank = [r.value for r in run_ranks(_without_sum_rank, 2, schedule.model_dump_json(), timeout_s=GROUP_TIMEOUT_S)]
    assert grad_diff(schedule, per_rank, BATCH) > 1e-3


def test_check_replays_dualpipe_from_the_command_line() -> None:
    """The issue's command: the dual placement follows from the method."""
    run = subprocess.run([sys.executable, "-m", "pipesched.runtime.check", "--world", "4", "--method", "dualpipe",
                          "--stages-per-device", "2", "--timeout", str(GROUP_TIMEOUT_S)],
                         capture_output=True, text=True, timeout=GROUP_TIMEOUT_S + 30)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "placement=dual" in run.stdout
    assert float(run.stdout.split("max_grad_diff=")[1].split()[0]) <= TOLERANCE


def test_a_split_transformer_on_a_dual_placement_with_a_recomputed_stage() -> None:
    """The runtime's transformer, model stages [embedding + 2 blocks | 2 blocks + head] held twice;
    stage id 3 (rank 0's upward chunk, model stage 1) recomputes: every twin gets the reference."""
    from pipesched.runtime.transformer import (
        TinyTransformer,
        config_dict,
        reference_grads,
        sample_tokens,
    )
    from pipesched.runtime.transformer import replay_rank as transformer_rank

    config = TinyTransformer(vocab=32, hidden=16, heads=2, ffn=32, layers=4, seq=5)
    schedule = _dual(2, 4, "greedy")
    jobs = [(schedule.model_dump_json(), [(0, 3), (3, 6)], [3])]
    per_rank = [r.value[0] for r in run_ranks(transformer_rank, 2, jobs, config_dict(config), 9, 2,
                                              timeout_s=GROUP_TIMEOUT_S)]
    ref = reference_grads(config, *sample_tokens(9, config))
    for rank, got in enumerate(per_rank):
        assert set(got["grads"]) == set(ref), rank  # each rank holds both model stages
        diff = max(float((got["grads"][k] - ref[k]).abs().max()) for k in ref)
        assert diff <= TOLERANCE, f"rank {rank}: max grad diff {diff:g}"


def test_an_overlapped_pair_runs_its_forward_first_on_the_rank() -> None:
    """``costs.overlap_fb``: DualPipe's F&B pairs replay as F, then B (one stream per rank)."""
    from pipesched.runtime.replay.plan import Compute, rank_plan

    schedule = solve(Problem(devices=4, microbatches=8, stages_per_device=2, placement="dual",
                             costs={"overlap_fb": 0.6}), "dualpipe")
    timed = {o.id: o for o in schedule.ops}
    pairs = {(o.device, o.start, o.end) for o in schedule.ops if o.kind == "F"} & {
        (o.device, o.start, o.end) for o in schedule.ops if o.kind == "B" and o.end > o.start}
    assert pairs, "dualpipe with overlap_fb paired nothing: the test would not exercise pairs"
    for rank in range(4):
        ops = [i.op for i in rank_plan(schedule, rank) if isinstance(i, Compute)]
        for k, op in enumerate(ops):
            o = timed[op]
            if (o.device, o.start, o.end) in pairs:
                partner = ops[k + 1] if o.kind == "F" else ops[k - 1]
                assert timed[partner].kind == ("B" if o.kind == "F" else "F"), (rank, op, partner)

"""Data parallelism in the runtime: 2 pipeline x 2 data-parallel gloo ranks. Each stage's gradients are
averaged over the replicas once its last W (B when fused) has run, so every replica ends a step with the
unsplit model's full-batch gradients; then the optimizer steps. runtime.check --dp replays it too."""

from __future__ import annotations

import pytest
import torch
from runtime_limits import GROUP_TIMEOUT_S

from pipesched.runtime.check import _groups, _my_modules
from pipesched.runtime.check import main as check_main
from pipesched.runtime.launch import run_ranks
from pipesched.runtime.model import mlp_stages, reference_grads, sample_batch
from pipesched.solver import Problem, Schedule, solve

P, DP, M = 2, 2, 4
BATCH = 2 * 9  # two replicas of 9: uneven microbatches in each
LR = 0.1
CASES = [("1f1b", {}), ("zb-h1", {}), ("zb-v", {"stages_per_device": 2, "placement": "v"}),
         ("interleaved-1f1b", {"stages_per_device": 2}), ("1f1b", {"split_backward": False})]


def dp_rank(rank: int, world: int, schedules: list[str]) -> list[dict]:
    """Per schedule: this rank's gradients after a step, its parameters after one SGD step, and whether
    each stage's sync started before the rank's last op ended (overlapped) or only after it."""
    from pipesched.runtime.replay.executor import PipelineExecutor

    pipe, data = _groups(rank, P, DP)
    replica, pipe_rank = divmod(rank, P)
    x, y = sample_batch(BATCH)
    share = BATCH // DP
    x, y = x[replica * share:(replica + 1) * share], y[replica * share:(replica + 1) * share]
    out = []
    for text in schedules:
        schedule = Schedule.model_validate_json(text)
        mine = _my_modules(schedule, pipe_rank)
        params = [p for m in mine.values() for p in m.parameters()]
        sgd = torch.optim.SGD(params, lr=LR)
        ex = PipelineExecutor(schedule, mine, torch.nn.functional.mse_loss, timeout_s=20, group=pipe,
                              data_parallel=data, optimizer=sgd)
        before = {f"{s}.{n}": p.detach().clone() for s, m in mine.items() for n, p in m.named_parameters()}
        ex.step(x, y)
        out.append({"grads": {f"{s}.{n}": p.grad.clone() for s, m in mine.items() for n, p in m.named_parameters()},
                    "before": before,
                    "after": {f"{s}.{n}": p.detach().clone() for s, m in mine.items() for n, p in m.named_parameters()}})
    return out


@pytest.fixture(scope="module")
def replayed() -> tuple[list[Schedule], list[list[dict]]]:
    schedules = [solve(Problem(devices=P, microbatches=M, **kw), method) for method, kw in CASES]
    results = run_ranks(dp_rank, P * DP, [s.model_dump_json() for s in schedules], timeout_s=GROUP_TIMEOUT_S)
    return schedules, [r.value for r in results]


def test_every_replica_ends_the_step_with_the_full_batch_gradients_and_steps_on_them(replayed) -> None:  # type: ignore[no-untyped-def]
    schedules, per_rank = replayed
    x, y = sample_batch(BATCH)
    for k, schedule in enumerate(schedules):
        ref = reference_grads(mlp_stages(schedule.problem.num_stages), x, y)
        seen = set()
        for rank in range(P * DP):
            got = per_rank[rank][k]
            for name, g in got["grads"].items():
                assert torch.allclose(g, ref[name], atol=1e-6), (CASES[k], rank, name)
                step = got["before"][name] - LR * ref[name]
                assert torch.allclose(got["after"][name], step, atol=1e-6), (CASES[k], rank, name)
                seen.add(name)
        assert seen == set(ref), CASES[k]


def test_one_replica_alone_does_not_have_the_full_batch_gradients() -> None:
    """Guard against a test that cannot fail: a replica's own share gives other gradients."""
    x, y = sample_batch(BATCH)
    full = reference_grads(mlp_stages(2), x, y)
    half = reference_grads(mlp_stages(2), x[: BATCH // 2], y[: BATCH // 2])
    assert max(float((full[k] - half[k]).abs().max()) for k in full) > 1e-3


def test_runtime_check_replays_data_parallel_steps(capsys: pytest.CaptureFixture[str]) -> None:
    assert check_main(["--world", "2", "--dp", "2", "--method", "zb-h1"]) == 0
    out = capsys.readouterr().out
    assert "dp=2" in out and "max_grad_diff=" in out
    assert check_main(["--world", "2", "--dp", "0"]) == 2

"""What a trainer does at start-up with pipesched: profile -> solve (service or local) -> replay.

1. Profile the real stage modules on this machine (F, B, W times and activation memory per stage).
2. Ask the schedule service for a schedule of that problem (``Client(..., fallback="local")``: with
   no service running, it solves in-process and says so).
3. Replay it for a few training steps on 2 local gloo ranks and print predicted vs measured step
   time and bubble.

    python examples/trainer_startup.py [--url http://127.0.0.1:8000] [--method zb-h1] [--steps 5]

On a GPU cluster the same executor runs under torchrun with NCCL (see the README).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import warnings

import torch
import torch.distributed as dist

from pipesched.client import Client
from pipesched.runtime.executor import PipelineExecutor
from pipesched.runtime.launch import run_ranks
from pipesched.runtime.model import mlp_stages, sample_batch
from pipesched.runtime.profile import profile
from pipesched.solver import Schedule

WIDTH, BATCH, MICROBATCHES, WORLD = 512, 64, 8, 2
LOSS = torch.nn.functional.mse_loss


def build_stages(num_stages: int) -> list[torch.nn.Module]:
    return mlp_stages(num_stages, width=WIDTH, in_dim=WIDTH, out_dim=WIDTH)


def train_rank(rank: int, world: int, schedule_json: str, steps: int) -> list[tuple[float, float]]:
    """One rank of the trainer: its stages, an optimizer, ``steps`` steps; (step s, busy s) per step."""
    schedule = Schedule.model_validate_json(schedule_json)
    stages = build_stages(schedule.problem.num_stages)
    mine = {o.stage: stages[o.stage] for o in schedule.ops if o.device == rank}
    params = [p for m in mine.values() for p in m.parameters()]
    optimizer = torch.optim.SGD(params, lr=1e-3)
    executor = PipelineExecutor(schedule, mine, LOSS, timeout_s=60)
    x, y = sample_batch(BATCH, in_dim=WIDTH, out_dim=WIDTH)
    out = []
    for _ in range(steps + 1):  # the first step agrees shapes: not timed
        optimizer.zero_grad(set_to_none=True)
        dist.barrier()
        executor.step(x, y)
        optimizer.step()
        t = torch.tensor([executor.last_step_s, executor.last_busy_s], dtype=torch.float64)
        step = t[:1].clone()
        dist.all_reduce(step, op=dist.ReduceOp.MAX)
        dist.all_reduce(t[1:], op=dist.ReduceOp.SUM)
        out.append((float(step), float(t[1])))
    return out[1:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000", help="pipesched service (local fallback if down)")
    ap.add_argument("--method", default="zb-h1")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--time-limit", type=float, default=10.0)
    args = ap.parse_args()
    torch.set_num_threads(1)  # one core per rank on this 2-core example

    stages = build_stages(WORLD)
    x, y = sample_batch(BATCH // MICROBATCHES, in_dim=WIDTH, out_dim=WIDTH)
    problem = profile(stages, x, loss_fn=LOSS, sample_target=y, microbatches=MICROBATCHES, repeats=10)
    print(f"profiled {problem.num_stages} stages (ms): F={problem.costs.forward} "
          f"B={problem.costs.backward_input} W={problem.costs.backward_weight}")

    with warnings.catch_warnings(record=True) as caught, Client(args.url, fallback="local", retries=1,
                                                                 cache_dir=False) as client:
        warnings.simplefilter("always")
        schedule = client.solve(problem, method=args.method, time_limit_s=args.time_limit)
    source = "solved locally (service unreachable)" if caught else f"from the service at {args.url}"
    print(f"schedule {schedule.method} ({schedule.status}) {source}: makespan {schedule.makespan:.2f} ms, "
          f"bubble {schedule.bubble_ratio:.3f}")

    runs = run_ranks(train_rank, WORLD, schedule.model_dump_json(), args.steps, timeout_s=300)[0].value
    step = statistics.median(s for s, _ in runs)
    bubble = statistics.median(1 - busy / (WORLD * s) for s, busy in runs)
    print(f"{'':10} {'step ms':>9} {'bubble':>7}")
    print(f"{'predicted':10} {schedule.makespan:9.2f} {schedule.bubble_ratio:7.3f}")
    print(f"{'measured':10} {1e3 * step:9.2f} {bubble:7.3f}   (median of {len(runs)} steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

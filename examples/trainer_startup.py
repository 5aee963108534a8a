"""What a trainer does at start-up with pipesched: profile -> solve (service or local) -> replay.

1. Profile the real stage modules on this machine (F, B, W times and activation memory per stage),
   and, on the ranks that will train, the link between them (``profile_link``: latency and
   bandwidth, hence ``comm``), the executor's fixed cost per op (``profile_dispatch``: posting sends
   and receives, walking the plan, waking from waits) and the contention factor (``contention_factor``:
   how much slower compute runs with every rank computing at once than alone).
2. Ask the schedule service for a schedule of that problem (``Client(..., fallback="local")``: with
   no service running, it solves in-process and says so). Its costs are
   ``compute × contention + dispatch`` per op and ``comm = latency + activation bytes / bandwidth``.
3. Replay it for a few training steps on 2 local gloo ranks and print predicted vs measured step
   time and bubble (and the load average: on a shared machine every measured term carries it).

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
from pipesched.runtime.launch import run_ranks
from pipesched.runtime.machine_load import cpu_mark, describe, other_cores
from pipesched.runtime.model import mlp_stages, sample_batch
from pipesched.runtime.profiling.contention import contention_factor
from pipesched.runtime.profiling.profile import profile
from pipesched.runtime.profiling.profile_layers import LinkProfile, profile_dispatch, profile_link
from pipesched.runtime.replay.executor import PipelineExecutor
from pipesched.solver import Costs, Problem, Schedule
from pipesched.solver.costmodel.shared_cores import usable_cores

WIDTH, BATCH, MICROBATCHES, WORLD = 512, 64, 8, 2
LOSS = torch.nn.functional.mse_loss


def build_stages(num_stages: int) -> list[torch.nn.Module]:
    return mlp_stages(num_stages, width=WIDTH, in_dim=WIDTH, out_dim=WIDTH)


def machine_rank(rank: int, world: int) -> tuple[LinkProfile, float, float]:
    """On the training ranks: the link, the executor's cost per op (ms) and the contention factor."""
    link = profile_link()
    return link, profile_dispatch(latency_ms=link.latency_ms), contention_factor()


def with_machine(problem: Problem, activation_bytes: int, link: LinkProfile, dispatch_ms: float,
                 contention: float) -> Problem:
    """The profiled problem with the machine's terms: ``compute × contention + dispatch`` per op and
    ``comm = latency + bytes / bandwidth``."""
    c = problem.costs

    def per_op(xs: float | list[float]) -> list[float]:
        return [x * contention + dispatch_ms for x in (xs if isinstance(xs, list) else [xs] * problem.num_stages)]

    comm = link.latency_ms + (activation_bytes / 2**30 / link.gib_per_ms if link.gib_per_ms else 0.0)
    costs = Costs(forward=per_op(c.forward), backward_input=per_op(c.backward_input),
                  backward_weight=per_op(c.backward_weight), comm=comm)
    return problem.model_copy(update={"costs": costs})


def train_rank(rank: int, world: int, schedule_json: str, steps: int) -> dict:
    """One rank of the trainer: its stages, an optimizer, ``steps`` steps; ``steps``: (step s, busy s)
    per step, ``marks``: CPU marks around the timed steps (what other processes took meanwhile)."""
    schedule = Schedule.model_validate_json(schedule_json)
    stages = build_stages(schedule.problem.num_stages)
    mine = {o.stage: stages[o.stage] for o in schedule.ops if o.device == rank}
    params = [p for m in mine.values() for p in m.parameters()]
    optimizer = torch.optim.SGD(params, lr=1e-3)
    executor = PipelineExecutor(schedule, mine, LOSS, timeout_s=60)
    x, y = sample_batch(BATCH, in_dim=WIDTH, out_dim=WIDTH)
    out, start = [], None
    for i in range(steps + 1):  # the first step agrees shapes: not timed
        if i == 1:
            start = cpu_mark()
        optimizer.zero_grad(set_to_none=True)
        dist.barrier()
        executor.step(x, y)
        optimizer.step()
        t = torch.tensor([executor.last_step_s, executor.last_busy_s], dtype=torch.float64)
        step = t[:1].clone()
        dist.all_reduce(step, op=dist.ReduceOp.MAX)
        dist.all_reduce(t[1:], op=dist.ReduceOp.SUM)
        out.append((float(step), float(t[1])))
    return {"steps": out[1:], "marks": (start, cpu_mark())}


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
    compute = profile(stages, x, loss_fn=LOSS, sample_target=y, microbatches=MICROBATCHES, repeats=10)
    c = compute.costs
    print(f"profiled {compute.num_stages} stages (ms): F={_ms(c.forward)} B={_ms(c.backward_input)} "
          f"W={_ms(c.backward_weight)}")
    link, dispatch, contention = run_ranks(machine_rank, WORLD, timeout_s=300)[0].value
    activation = stages[0](x).untyped_storage().nbytes()  # what crosses each stage boundary
    problem = with_machine(compute, activation, link, dispatch, contention)
    print(f"on {WORLD} ranks: link latency {1e3 * link.latency_ms:.0f} us, bandwidth "
          + (f"{1e3 * link.gib_per_ms:.2f} GiB/s" if link.gib_per_ms else "not measurable")
          + f" -> comm {problem.costs.comm:.3f} ms; dispatch {dispatch:.3f} ms per op; "
          f"contention x{contention:.2f} on compute")

    with warnings.catch_warnings(record=True) as caught, Client(args.url, fallback="local", retries=1,
                                                                 cache_dir=False) as client:
        warnings.simplefilter("always")
        schedule = client.solve(problem, method=args.method, time_limit_s=args.time_limit)
    source = "solved locally (service unreachable)" if caught else f"from the service at {args.url}"
    print(f"schedule {schedule.method} ({schedule.status}) {source}: makespan {schedule.makespan:.2f} ms, "
          f"bubble {schedule.bubble_ratio:.3f}")

    ranks = [r.value for r in run_ranks(train_rank, WORLD, schedule.model_dump_json(), args.steps, timeout_s=300)]
    runs = ranks[0]["steps"]
    other = other_cores([r["marks"] for r in ranks])
    step = statistics.median(s for s, _ in runs)
    bubble = statistics.median(1 - busy / (WORLD * s) for s, busy in runs)
    bare = _retimed(schedule, compute)
    print(f"{'':10} {'step ms':>9} {'bubble':>7}")
    print(f"{'predicted':10} {schedule.makespan:9.2f} {schedule.bubble_ratio:7.3f}   "
          f"(the same order on the profiled compute alone: {bare:.2f} ms)")
    print(f"{'measured':10} {1e3 * step:9.2f} {bubble:7.3f}   (median of {len(runs)} steps)")
    err = (1e3 * step - schedule.makespan) / (1e3 * step)
    print(f"error {100 * err:+.1f}% ({describe(other, usable_cores())})")
    return 0


def _ms(xs: float | list[float]) -> str:
    return "[" + ", ".join(f"{x:.3f}" for x in (xs if isinstance(xs, list) else [xs])) + "]"


def _retimed(schedule: Schedule, problem: Problem) -> float:
    """The makespan of ``schedule``'s per-device order under ``problem``'s costs."""
    from pipesched.solver import from_order

    order = [[o.id for o in sorted(schedule.ops, key=lambda o: (o.start, o.end)) if o.device == d]
             for d in range(problem.devices)]
    return from_order(problem, schedule.method, order).makespan


if __name__ == "__main__":
    sys.exit(main())

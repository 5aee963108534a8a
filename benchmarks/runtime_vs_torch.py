"""Step time of pipesched's executor vs torch's _PipelineScheduleRuntime on the same schedule.

Same model (an MLP of uneven stages, wide enough that compute dominates), same gloo process
group (2 CPU ranks, 1 thread each), same schedule (ours replayed directly, torch's loaded from
the torch-csv export), runs alternated step by step (order flipped every round) so that load from
other processes on the machine hits both alike. The schedule is solved from costs measured by
``pipesched.runtime.profiling.profile``, so its predicted makespan and bubble can be compared with the
measured ones. A second table checks that split backward costs what the fused backward costs:
F + B + W vs F + fused, per stage, alternated.

    python benchmarks/runtime_vs_torch.py            # writes benchmarks/results/runtime.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
import torch.distributed as dist

from pipesched.runtime.launch import run_ranks
from pipesched.runtime.model import mlp_stages, sample_batch
from pipesched.runtime.profiling.profile import profile
from pipesched.runtime.replay.executor import PipelineExecutor
from pipesched.runtime.replay.split_backward import backward_full, backward_input
from pipesched.runtime.replay.torch_runtime import torch_schedule, torch_step
from pipesched.solver import Instance, Schedule, simulate, solve
from pipesched.solver.formats.torch_csv import rank_programs

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import publish  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "runtime.md"
LOSS = torch.nn.functional.mse_loss


def _stages(num_stages: int, width: int) -> list[torch.nn.Module]:
    return mlp_stages(num_stages, width=width, in_dim=width, out_dim=width)


def _timed_step(which: str, ours: PipelineExecutor, theirs, mine: dict, num_stages: int,
                x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """One step of ``which`` runtime: (max step time over ranks, sum of our busy time over ranks)."""
    for m in mine.values():
        m.zero_grad(set_to_none=True)
    dist.barrier()
    t0 = time.perf_counter()
    if which == "ours":
        ours.step(x, y)
        busy = ours.last_busy_s
    else:
        torch_step(theirs, mine, num_stages, x, y)
        busy = 0.0
    step = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
    total_busy = torch.tensor([busy], dtype=torch.float64)
    dist.all_reduce(step, op=dist.ReduceOp.MAX)
    dist.all_reduce(total_busy, op=dist.ReduceOp.SUM)
    return float(step), float(total_busy)


def bench_rank(rank: int, world: int, schedules: list[str], width: int, batch: int, rounds: int) -> list[dict]:
    """On each rank: alternate our step and torch's step on every schedule; step time = max over ranks."""
    x, y = sample_batch(batch, in_dim=width, out_dim=width)
    out = []
    for text in schedules:
        schedule = Schedule.model_validate_json(text)
        all_stages = _stages(schedule.problem.num_stages, width)
        mine = {o.stage: all_stages[o.stage] for o in schedule.ops if o.device == rank}
        ours = PipelineExecutor(schedule, mine, LOSS, timeout_s=120)
        theirs = torch_schedule(schedule, mine, LOSS)

        def run(which: str, ours=ours, theirs=theirs, mine=mine, stages=schedule.problem.num_stages):
            return _timed_step(which, ours, theirs, mine, stages, x, y)

        for _ in range(2):  # warm-up (torch agrees shapes on its first step, we on ours)
            run("ours")
            run("torch")
        times: dict[str, list[float]] = {"ours": [], "torch": []}
        busy: list[float] = []
        op_s: dict[tuple, list[float]] = {}
        for r in range(rounds):
            for which in (("ours", "torch") if r % 2 == 0 else ("torch", "ours")):
                step, b = run(which)
                times[which].append(step)
                if which == "ours":
                    busy.append(b)
                    for op, t in ours.last_op_s.items():
                        op_s.setdefault(tuple(op), []).append(t)
        out.append({"ours": times["ours"], "torch": times["torch"], "busy": busy,
                    "op_s": {op: statistics.median(ts) for op, ts in op_s.items()}})
    return out


def in_run_prediction(schedule: Schedule, op_s: dict[tuple, float]) -> tuple[float, float]:
    """(makespan s, bubble) of the schedule's own order re-timed with the op times measured in the run.

    Separates what the schedule implies from what the runtime adds: if the measured step is close
    to this makespan, the executor adds little idle time of its own.
    """
    inst = Instance.from_problem(schedule.problem)
    timed = replace(inst, duration={k: tuple(
        statistics.mean(t for (kind, stage, _), t in op_s.items() if kind == k and stage == st)
        for st in range(inst.num_stages)) for k in inst.kinds})
    start = simulate(timed, rank_programs(schedule))
    span = max(start[op] + timed.cost(op) for op in start)
    return span, 1 - timed.total_work() / (inst.devices * span)


def split_vs_fused(width: int, microbatch: int, repeats: int) -> list[tuple[int, float, float, float, float]]:
    """Per stage, ms of F + B + W and of F + fused backward, alternated: (stage, min, min, median, median)."""
    torch.set_num_threads(1)
    stages = _stages(3, width)
    x, y = sample_batch(microbatch, in_dim=width, out_dim=width)
    rows = []
    for s, module in enumerate(stages):
        params = list(module.parameters())
        xin = x if s == 0 else torch.randn(microbatch, width)
        split_t, fused_t = [], []
        for k in range(repeats + 2):
            for mode in (("split", "fused") if k % 2 == 0 else ("fused", "split")):
                module.zero_grad(set_to_none=True)
                xi = xin.detach().requires_grad_(s > 0)
                t0 = time.perf_counter()
                out = module(xi)
                target = LOSS(out, y) if s == len(stages) - 1 else out
                g = None if s == len(stages) - 1 else torch.ones_like(out)
                if mode == "split":
                    _, job = backward_input([target], [g], [xi], params)
                    job.run()
                else:
                    backward_full([target], [g], [xi])
                dt = time.perf_counter() - t0
                if k >= 2:
                    (split_t if mode == "split" else fused_t).append(dt)
        rows.append((s, 1e3 * min(split_t), 1e3 * min(fused_t), 1e3 * statistics.median(split_t),
                     1e3 * statistics.median(fused_t)))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--methods", default="1f1b,zb-h1,gpipe,interleaved-1f1b")
    ap.add_argument("--output", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    command = "python benchmarks/runtime_vs_torch.py " + " ".join(sys.argv[1:] if argv is None else argv)

    mb = args.batch // args.microbatches
    x, y = sample_batch(mb, in_dim=args.width, out_dim=args.width)
    schedules = []
    for method in args.methods.split(","):
        v = 2 if method in ("interleaved-1f1b", "zb-v") else 1
        stages = _stages(2 * v, args.width)
        problem = profile(stages, x, loss_fn=LOSS, sample_target=y, microbatches=args.microbatches,
                          stages_per_device=v, placement="v" if method == "zb-v" else "loop", repeats=5)
        schedules.append(solve(problem, method))
    results = run_ranks(bench_rank, 2, [s.model_dump_json() for s in schedules], args.width, args.batch,
                        args.rounds, timeout_s=1800)
    per = results[0].value  # step times are already the max over ranks, busy the sum
    for k, res in enumerate(per):
        res["op_s"].update(results[1].value[k]["op_s"])

    lines = [
        "# Runtime: pipesched executor vs torch `_PipelineScheduleRuntime`\n",
        f"Made by `{command.strip()}` (torch {torch.__version__}, CPU gloo, 2 ranks x 1 thread, "
        f"MLP width {args.width}, batch {args.batch} in {args.microbatches} microbatches, "
        f"{args.rounds} alternated rounds, medians). The machine is a shared 2-core box with other "
        "jobs running: absolute times are noisy, the alternation keeps the ratio fair.\n",
        "| method | stages | ours ms | torch ms | ours / torch | paired ratio, quartiles | measured bubble (ours) | predicted bubble, "
        "profiled costs | predicted step ms, profiled | predicted bubble, in-run op times | "
        "predicted step ms, in-run |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for schedule, res in zip(schedules, per, strict=True):
        ours, theirs = statistics.median(res["ours"]), statistics.median(res["torch"])
        k = res["ours"].index(sorted(res["ours"])[len(res["ours"]) // 2])
        bubble = 1 - res["busy"][k] / (2 * res["ours"][k])
        p = schedule.problem
        span, in_run_bubble = in_run_prediction(schedule, res["op_s"])
        q1, _, q3 = statistics.quantiles([a / b for a, b in zip(res["ours"], res["torch"], strict=True)], n=4)
        lines.append(f"| {schedule.method} | {p.num_stages} ({p.placement}) | {1e3 * ours:.1f} | {1e3 * theirs:.1f} | "
                     f"{ours / theirs:.3f} | {q1:.2f} - {q3:.2f} | {bubble:.3f} | {schedule.bubble_ratio:.3f} | {schedule.makespan:.1f} | "
                     f"{in_run_bubble:.3f} | {1e3 * span:.1f} |")
    lines += [
        "",
        "Paired ratio: ours / torch for the two steps of each round (run back to back), first and "
        "third quartile over the rounds. Measured bubble = 1 - (sum over ranks of time inside compute ops) / (2 x step time). Predicted, "
        "profiled: the schedule's `bubble_ratio` and makespan for the costs `profile()` measured in one "
        "process before the run. Predicted, in-run: the same per-device order re-timed with the median op "
        "times measured during the run (two ranks share the cores with other jobs, so ops run slower "
        "than when profiled alone); the gap between it and the measured step is what the runtime "
        "(communication, Python) adds.",
        "",
        "## Split backward costs what the fused backward costs",
        "",
        f"One stage, one microbatch of {mb}, 100 alternated runs each, ms (best of, and median; the best "
        "is the steadier figure on a loaded machine):",
        "",
        "| stage | layers | F + B + W best | F + fused best | ratio best | F + B + W median | F + fused median | "
        "ratio median |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s, sb, fb, sm, fm in split_vs_fused(args.width, mb, 100):
        lines.append(f"| {s} | {1 + s % 3} | {sb:.2f} | {fb:.2f} | {sb / fb:.3f} | {sm:.2f} | {fm:.2f} | {sm / fm:.3f} |")
    text = "\n".join(lines) + "\n"
    publish(text, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())

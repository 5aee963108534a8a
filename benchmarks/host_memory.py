"""Predicted vs measured step time with glibc's default allocator and with freed host memory kept
(``runtime/host_memory.py``), side by side on this machine (issue 11).

Why: on the fidelity model's p = 2 replays the prediction was 1.4-26% short, by method, while each op
alone measured what the profile said. The ops that ran slow were those right after a step freed many
held activations: glibc returned that memory to the kernel and the next op page-faulted it back in.
This benchmark measures what that costs each method: the same profile -> solve -> replay loop as
``fidelity.py`` (its model, one thread per rank, gloo on 127.0.0.1), run in alternated rounds, each
round two fresh processes: one with the allocator left at the C library's defaults
(``PIPESCHED_HOST_MALLOC=default``) and one as the runtime sets it. Each process profiles the layers
under its own allocator, solves every method on that profile and replays each method on its own
fresh pair of rank processes (as a trainer runs one schedule; in ``fidelity.py`` the methods share
the ranks, so what one leaves on the heap changes the next); the error is
(measured - predicted) / measured. The prediction is the solved schedule's makespan (layer sums +
the fixed per-op cost; p = 2 ranks on 2 cores, no contention term), the same in both modes.

    python benchmarks/host_memory.py [--rounds 2] [--steps 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import command_line, publish  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "host_memory.md"
MODES = ("default", "keep")


def measure(steps: int, time_limit: float) -> list[dict]:
    """One process, this allocator: profile, solve each method at p = 2, replay; per method the
    prediction (ms) and the fastest measured step (ms)."""
    import torch
    from fidelity import METHODS, induced_problem  # the fidelity benchmark's model and problems

    from pipesched.runtime import transformer as tt
    from pipesched.runtime.host_memory import keep_freed_host_memory
    from pipesched.runtime.launch import run_ranks
    from pipesched.runtime.profiling.profile_layers import LinkProfile, op_overhead, profile_layers
    from pipesched.solver import SolveOptions, solve

    torch.set_num_threads(1)
    kept = keep_freed_host_memory()  # a no-op under PIPESCHED_HOST_MALLOC=default
    cfg = tt.TinyTransformer(vocab=8192, hidden=256, heads=4, ffn=1024, layers=8, seq=128)
    layers = tt.transformer_layers(cfg)
    x, y = tt.sample_tokens(2, cfg)
    overhead = op_overhead()
    model = profile_layers(layers, x, loss_fn=tt.lm_loss, sample_target=y, op_overhead=overhead, repeats=7, warmup=2)
    link = LinkProfile(latency_ms=0.1, gib_per_ms=None, samples=())  # loopback: latency only
    p, microbatches = 2, 8
    rows, jobs = [], []
    for method, v, placement in METHODS:
        split = tt.even_split(len(layers), p if placement == "dual" else p * v)
        problem = induced_problem(model, split, p, v, placement, microbatches, overhead, link, 1.0)
        schedule = solve(problem, method, SolveOptions(time_limit_s=time_limit))
        rows.append({"method": method, "predicted": schedule.makespan, "kept": kept})
        jobs.append((schedule.model_dump_json(), split))
    for row, job in zip(rows, jobs, strict=True):  # fresh rank processes per method, as a trainer runs one
        ranks = [r.value for r in run_ranks(tt.replay_rank, p, [job], tt.config_dict(cfg), microbatches * 2, steps,
                                            timeout_s=600)]
        row["measured"] = 1e3 * max(r[0]["step_s"] for r in ranks)
    return rows


def run(args: argparse.Namespace) -> str:
    by: dict[str, dict[str, list[tuple[float, float]]]] = {m: {} for m in MODES}
    kept_seen: dict[str, set[bool]] = {m: set() for m in MODES}
    for _ in range(args.rounds):
        for mode in MODES:
            env = {**os.environ, "PIPESCHED_HOST_MALLOC": mode}
            out = subprocess.run([sys.executable, __file__, "--child", "--steps", str(args.steps),
                                  "--time-limit", str(args.time_limit)], env=env, capture_output=True,
                                 text=True, timeout=1800, check=True)
            for row in json.loads(out.stdout.strip().splitlines()[-1]):
                by[mode].setdefault(row["method"], []).append((row["predicted"], row["measured"]))
                kept_seen[mode].add(row["kept"])
    assert kept_seen["keep"] == {True} and kept_seen["default"] == {False}, kept_seen
    lines = ["# Host memory: predicted vs measured step with glibc's defaults and with freed memory kept", "",
             f"Command: `{args.command}`", "",
             "Model and problems of `benchmarks/fidelity.py` (TinyTransformer vocab 8192, hidden 256, 8 blocks, "
             "seq 128; microbatch 2 sequences, 8 microbatches), p = 2 ranks, one thread each, gloo on 127.0.0.1. "
             f"{args.rounds} alternated rounds; each round runs each allocator in a fresh process that profiles the "
             "layers, solves every method and replays each on its own fresh pair of rank processes for "
             f"{args.steps} steps (the fastest counted). Predicted = the solved makespan (layer sums + the fixed "
             "per-op cost); error = (measured - predicted) / measured, the median over rounds. "
             "`default`: `PIPESCHED_HOST_MALLOC=default`, glibc left alone; `keep`: as the runtime sets it "
             "(`runtime/host_memory.py`).", "",
             "| method | default: predicted / measured (ms) | error | keep: predicted / measured (ms) | error |",
             "|---|---|---|---|---|"]
    worst = {m: 0.0 for m in MODES}
    for method in by["keep"]:
        cells = []
        for mode in MODES:
            pairs = by[mode][method]
            pred = statistics.median(a for a, _ in pairs)
            meas = statistics.median(b for _, b in pairs)
            err = statistics.median((b - a) / b for a, b in pairs)
            worst[mode] = max(worst[mode], abs(err))
            cells.append(f"{pred:.1f} / {meas:.1f} | {100 * err:+.1f}%")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    lines += ["", f"Largest |error|: default {100 * worst['default']:.1f}%, keep {100 * worst['keep']:.1f}%."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--time-limit", type=float, default=5.0, help="auto's time limit (s)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("-o", "--output", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.steps, args.time_limit)))
        return 0
    args.command = command_line("host_memory.py", argv)
    before = os.getloadavg()
    publish(run(args), args.output, before)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

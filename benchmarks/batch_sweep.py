"""Offline batch throughput: ``pipesched batch`` on a sweep of 200 problems with ``--jobs 2``.

The sweep is seeded and varied (p in 2..8, m in 4..32, v in 1..2, uneven per-stage costs, comm,
some memory limits). Times the whole command (process start, every solve in its own killable
process, files and summary written), then the resumed re-run that finds everything solved.

    python benchmarks/batch_sweep.py [--method greedy] [--jobs 2] [--count 200] [--time-limit 5]

Writes results/batch_sweep.md (greedy) or results/batch_sweep_<method>.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import publish  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def sweep(count: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    problems = []
    for i in range(count):
        p = rng.choice([2, 4, 8])
        v = rng.choice([1, 1, 2])
        m = rng.choice([4, 8, 16, 32])
        stages = p * v
        f = [round(rng.uniform(0.8, 1.6), 3) for _ in range(stages)]
        problem = {
            "devices": p, "microbatches": m, "stages_per_device": v,
            "costs": {"forward": f, "backward_input": [round(x * 1.05, 3) for x in f],
                      "backward_weight": [round(x * 0.7, 3) for x in f], "comm": rng.choice([0.0, 0.05])},
            "objective": rng.choice(["makespan", "stage_span"]),
        }
        if rng.random() < 0.3:
            problem["memory"] = {"limit": float(2 * p)}
        problems.append({"name": f"sweep-{i:04d}", "problem": problem})
    return problems


def statuses_of(out: Path) -> Counter[str]:
    with open(out / "summary.csv") as f:
        return Counter(row["status"] for row in csv.DictReader(f))


def run(args: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pipesched", "batch", *args], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", default="greedy")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--time-limit", type=float, default=5.0)
    args = parser.parse_args()

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="pipesched-sweep-") as tmp:
        source = Path(tmp) / "sweep.jsonl"
        source.write_text("".join(json.dumps(x) + "\n" for x in sweep(args.count)))
        out = Path(tmp) / "out"
        common = [str(source), "-o", str(out), "--jobs", str(args.jobs), "--method", args.method,
                  "--time-limit", str(args.time_limit)]
        cold = run(common)
        cold_statuses = statuses_of(out)
        resumed = run(common)
        final_statuses = statuses_of(out)

    command = (f"python benchmarks/batch_sweep.py --method {args.method} --jobs {args.jobs} "
               f"--count {args.count} --time-limit {args.time_limit:g}")
    def describe(statuses: Counter[str]) -> str:
        return ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))

    failed_cold = cold_statuses.get("error", 0)
    lines = [
        "# Batch solving: a sweep of problems with `pipesched batch`",
        "",
        f"Command: `{command}`  ",
        f"Statuses after the cold run: {describe(cold_statuses)} (an error is a problem whose solver was killed "
        f"at its hard limit or refused it); after the resumed run: {describe(final_statuses)}.",
        "",
        "| run | problems | seconds | problems/s |",
        "|---|---|---|---|",
        f"| cold (`--jobs {args.jobs}`, method `{args.method}`) | {args.count} | {cold:.1f} | {args.count / cold:.1f} |",
        f"| resumed ({args.count - failed_cold} skipped, {failed_cold} tried again) | {args.count} | {resumed:.1f} "
        f"| {args.count / resumed:.1f} |",
    ]
    text = "\n".join(lines) + "\n"
    name = "batch_sweep.md" if args.method == "greedy" else f"batch_sweep_{args.method}.md"
    publish(text, RESULTS / name, load_before)
    return 0


if __name__ == "__main__":
    sys.exit(main())

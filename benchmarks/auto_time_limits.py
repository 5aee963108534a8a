"""Does ``auto`` return within its time limit? Wall time of every solve of the batch sweep's problems.

Issue 3: ``--time-limit S`` returns within S plus a small margin. This runs ``auto`` in one process
(imports warmed up first, so process start-up is not counted) on the 200 problems of
``benchmarks/batch_sweep.py``'s generator, for each limit, and counts solves past the limit and past
the limit + 0.5 s, with the slowest and the statuses.

    python benchmarks/auto_time_limits.py [--limits 0.3,1] [--count 200]

Writes ``benchmarks/results/auto_time_limits.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

from pipesched.solver import Problem, SolveOptions, solve, validate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from batch_sweep import sweep  # noqa: E402  (the same seeded problems as the batch benchmark)
from report import command_line, publish  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limits", default="0.3,1")
    ap.add_argument("--count", type=int, default=200)
    args = ap.parse_args(argv)
    solve(Problem(devices=2, microbatches=2), "auto", SolveOptions(time_limit_s=0.1))  # warm imports
    rows = []
    for limit in (float(x) for x in args.limits.split(",")):
        took, statuses, slowest, invalid = [], Counter(), ("", 0.0), 0
        for item in sweep(args.count):
            problem = Problem(**item["problem"])
            t0 = time.perf_counter()
            sched = solve(problem, "auto", SolveOptions(time_limit_s=limit))
            dt = time.perf_counter() - t0
            took.append(dt)
            statuses[sched.status] += 1
            invalid += bool(sched.ops) and validate(sched) != []
            if dt > slowest[1]:
                slowest = (item["name"], dt)
            print(f"limit {limit:g} {item['name']}: {sched.status} {dt:.2f}s", file=sys.stderr, flush=True)
        over = sum(t > limit for t in took)
        over_margin = sum(t > limit + 0.5 for t in took)
        status_text = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
        rows.append(f"| {limit:g} | {len(took)} | {over} | {over_margin} | {slowest[1]:.2f} ({slowest[0]}) | "
                    f"{sum(took) / len(took):.2f} | {status_text} | {invalid} |")
    command = command_line("auto_time_limits.py", argv)
    text = (
        "# `auto` against its time limit on the batch sweep's problems\n\n"
        f"Made by `{command}`: one process, imports warmed up, wall time of each `solve(..., \"auto\")`. "
        "Machine and load: see the header.\n\n"
        "| limit (s) | problems | past the limit | past limit + 0.5 s | slowest (s) | mean (s) | statuses "
        "| invalid |\n|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n"
    )
    publish(text, RESULTS / "auto_time_limits.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())

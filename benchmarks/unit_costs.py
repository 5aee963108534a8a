"""Unit costs (F = B = W = 1, comm 0, deltas +1/0/-1), every memory limit from 1 to 2p: proven optimal?

Target (issue 3): proven optimal in <= 2 s each for p <= 8, m <= 32 (objective makespan). For each
(p, m) the summary gives how many limits ``auto`` proved optimal, the slowest solve, and every case
it did not close with its gap. Run: ``python benchmarks/unit_costs.py`` (all of p 4, 8, 16; p = 16 is
reported but outside the target) or e.g. ``python benchmarks/unit_costs.py --p 4,8 --time-limit 2``.
Writes ``benchmarks/results/unit_costs.md`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from pipesched.solver import Problem, SolveOptions, solve

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import command_line, publish  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p", default="4,8,16")
    ap.add_argument("--m", default="8,16,32")
    ap.add_argument("--time-limit", type=float, default=2.0)
    ap.add_argument("--objective", default="makespan", choices=["makespan", "stage_span"])
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "unit_costs.md")
    args = ap.parse_args(argv)
    summary, open_cases = [], []
    load_before = os.getloadavg()[0]
    for p in (int(x) for x in args.p.split(",")):
        for m in (int(x) for x in args.m.split(",")):
            proven, slowest, slow_proven = 0, 0.0, 0.0
            for limit in range(1, 2 * p + 1):
                problem = Problem(devices=p, microbatches=m, memory={"limit": limit}, objective=args.objective)
                t0 = time.perf_counter()
                sched = solve(problem, "auto", SolveOptions(time_limit_s=args.time_limit))
                took = time.perf_counter() - t0
                slowest = max(slowest, took)
                if sched.status == "optimal":
                    proven += 1
                    slow_proven = max(slow_proven, took)
                else:
                    gap = 100 * (sched.objective_value - sched.lower_bound) / sched.objective_value
                    open_cases.append(f"| {p} | {m} | {limit} | {sched.objective_value:g} | {sched.lower_bound:g} | "
                                      f"{gap:.1f}% | {took:.1f} |")
                print(f"p={p} m={m} limit={limit}: {sched.status} {sched.objective_value:g} "
                      f"(bound {sched.lower_bound:g}) {took:.2f}s", file=sys.stderr, flush=True)
            summary.append(f"| {p} | {m} | {proven} / {2 * p} | {slow_proven:.2f} | {slowest:.2f} |")
    command = command_line("unit_costs.py", argv)
    text = (
        "# Unit costs, every memory limit\n\n"
        f"Made by `{command}` (method auto, time limit {args.time_limit:g} s, objective {args.objective}). "
        f"Wall times on 2 cores, load average {load_before:.1f} before and {os.getloadavg()[0]:.1f} after.\n\n"
        "| p | m | proven optimal | slowest proven (s) | slowest (s) |\n|---|---|---|---|---|\n"
        + "\n".join(summary)
        + "\n\nNot proven within the limit (best schedule, best proven bound, gap):\n\n"
        "| p | m | limit | makespan | bound | gap | time (s) |\n|---|---|---|---|---|---|---|\n"
        + "\n".join(open_cases) + "\n"
    )
    publish(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""V-shape and interleaved placements (v = 2) at p = 8, m = 32: ``auto`` against our recipes.

Target (issue 3): no worse than our zb-v (V placement) / interleaved-1f1b (loop placement), with the
proven gap reported. Each case gives ``auto`` the recipe's own peak activation memory as
``memory.limit`` (same memory, so the comparison is fair), plus an uncapped run. Unit costs
(F = B = W = 1) and a ZB-like uneven profile with comm. Run: ``python benchmarks/placements.py``
(``--time-limit S``, default 60). Writes ``benchmarks/results/placements.md``.
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

PROFILES = {
    "unit": {"forward": 1.0, "backward_input": 1.0, "backward_weight": 1.0, "comm": 0.0},
    "zb-like": {"forward": 1.0, "backward_input": 1.0, "backward_weight": 0.5, "comm": 0.05},
}
RECIPE = {"v": "zb-v", "loop": "interleaved-1f1b"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--objective", default="makespan", choices=["makespan", "stage_span"])
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "placements.md")
    args = ap.parse_args(argv)
    rows = []
    load_before = os.getloadavg()[0]
    for placement, recipe in RECIPE.items():
        for profile, costs in PROFILES.items():
            base = Problem(devices=8, microbatches=32, stages_per_device=2, placement=placement, costs=costs,
                           objective=args.objective)
            ref = solve(base, recipe)
            peak = max(ref.peak_memory)
            for label, limit in ((f"{peak:g} (recipe's peak)", peak), ("none", None)):
                problem = Problem.model_validate(
                    base.model_dump() | {"memory": base.memory.model_copy(update={"limit": limit}).model_dump()})
                t0 = time.perf_counter()
                sched = solve(problem, "auto", SolveOptions(time_limit_s=args.time_limit))
                took = time.perf_counter() - t0
                gap = 100 * (sched.objective_value - sched.lower_bound) / sched.objective_value
                verdict = "no worse" if sched.objective_value <= ref.objective_value + 1e-9 else "WORSE"
                rows.append(f"| {placement} | {profile} | {label} | {recipe} {ref.objective_value:g} | "
                            f"{sched.objective_value:g} | {sched.lower_bound:g} | {gap:.2f}% | {sched.status} | "
                            f"{verdict} | {took:.1f} |")
                print(rows[-1], file=sys.stderr, flush=True)
    command = command_line("placements.py", argv)
    text = (
        "# Placements with v = 2 (p = 8, m = 32)\n\n"
        f"Made by `{command}` (auto, time limit {args.time_limit:g} s, objective {args.objective}). Gap = "
        "(ours - proven bound) / ours. 2 cores, load average "
        f"{load_before:.1f} before and {os.getloadavg()[0]:.1f} after.\n\n"
        "| placement | costs | memory.limit | recipe | auto | proven bound | gap | status | vs recipe | time (s) |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n"
    )
    publish(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

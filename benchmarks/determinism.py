"""Does the same problem give the same schedule in two processes? Byte comparison of repeated solves.

Issue 3: "the same problem and method give the same schedule, byte for byte, across runs and
processes". A proven optimum is deterministic by construction; this measures the hard part, solves
that stop on their budget without a proof. Each case is solved twice, each time in a fresh Python
process, and the two JSON answers (``solve_time_s`` excluded) are compared; a mismatch is reported
as a different schedule or, when only the bound differs, a different bound.

    python benchmarks/determinism.py [--method auto] [--sweep 10]

Writes ``benchmarks/results/determinism.md`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from batch_sweep import sweep  # noqa: E402  (the same seeded problems as the batch benchmark)
from report import command_line, publish  # noqa: E402
from zb_paper import CASES  # noqa: E402

_CHILD = """
import json, sys
from pipesched.solver import Problem, SolveOptions, solve
problem = Problem.model_validate_json(sys.argv[1])
sched = solve(problem, sys.argv[2], SolveOptions(time_limit_s=float(sys.argv[3])))
print(json.dumps(sched.model_dump(mode="json", exclude={"solve_time_s"}), sort_keys=True))
"""


def cases(sweep_count: int) -> list[tuple[str, dict, float]]:
    """(name, problem, time limit): memory-tight unit costs (p = 16 ones unproven at 2 s), zero-bubble paper cases (the two unproven 2p
    ones at the paper's 60 s, where the search runs long enough to stop on its deterministic limit),
    the batch sweep."""
    out: list[tuple[str, dict, float]] = []
    for p, m, limit in ((4, 32, 2), (4, 32, 3), (8, 16, 4), (8, 32, 4), (8, 32, 6), (16, 32, 12), (16, 32, 14)):
        out.append((f"unit p={p} m={m} L={limit}", dict(devices=p, microbatches=m, memory={"limit": limit}), 2.0))
    for index, factor, limit in ((0, 2, 10.0), (4, 1, 10.0), (1, 2, 60.0), (4, 2, 60.0)):
        case = CASES[index]
        out.append((f"zb {case.model} m={case.m} {factor}p", case.problem(factor).model_dump(mode="json"), limit))
    for item in sweep(sweep_count):
        out.append((f"sweep {item['name']}", item["problem"], 1.0))
    return out


def solve_in_process(problem: dict, method: str, limit: float) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(problem), method, str(limit)],
                         capture_output=True, text=True, check=True, timeout=limit + 120)
    return json.loads(out.stdout)


def verdict(a: dict, b: dict) -> str:
    if a == b:
        return "same"
    strip = ("lower_bound", "status")
    if {k: v for k, v in a.items() if k not in strip} == {k: v for k, v in b.items() if k not in strip}:
        return "bound differs"
    return "schedule differs"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--method", default="auto")
    ap.add_argument("--sweep", type=int, default=10, help="how many batch-sweep problems to add")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "determinism.md")
    args = ap.parse_args(argv)
    load_before = os.getloadavg()[0]
    rows, same = [], 0
    todo = cases(args.sweep)
    for name, problem, limit in todo:
        a, b = (solve_in_process(problem, args.method, limit) for _ in range(2))
        v = verdict(a, b)
        same += v == "same"
        values = f"{a['objective_value']:g} / {b['objective_value']:g}"
        bounds = f"{a['lower_bound']:g} / {b['lower_bound']:g}"
        rows.append(f"| {name} | {limit:g} | {a['status']} / {b['status']} | {values} | {bounds} | {v} |")
        print(rows[-1], file=sys.stderr, flush=True)
    load_after = os.getloadavg()[0]
    command = command_line("determinism.py", argv)
    text = (
        f"# Determinism of `{args.method}` across processes\n\n"
        f"Made by `{command}`. Each problem solved twice, each in a fresh process; `solve_time_s` excluded. "
        f"**{same} of {len(todo)} identical.** Load average {load_before:.1f} before, {load_after:.1f} after "
        "(2 cores).\n\n"
        "| problem | limit (s) | status | objective | lower bound | verdict |\n|---|---|---|---|---|---|\n"
        + "\n".join(rows) + "\n"
    )
    publish(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

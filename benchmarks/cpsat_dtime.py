"""How fast does CP-SAT's deterministic clock run against the wall clock on our models?

Why it matters: a search that is not proven optimal stops on its deterministic time limit (then
the answer repeats byte for byte) or on the wall-clock safety net (then it may not). The budgets in
``solver/budget/`` (``DTIME_PER_SECOND``, ``PRECEDENCES_DTIME_PER_SECOND``) must therefore stay
below the rate measured here. Every CP-SAT solve made by ``auto`` on each problem is logged with
its wall time, deterministic time and which limit it had.

    python benchmarks/cpsat_dtime.py [--time-limit 2] [--only zb]

Writes ``benchmarks/results/cpsat_dtime.md`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from ortools.sat.python import cp_model

from pipesched.solver import Problem, SolveOptions, solve

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import command_line, publish  # noqa: E402
from zb_paper import CASES  # noqa: E402

#: Uneven per-stage forward costs (the batch sweep's shape: B = 1.05 F, W = 0.7 F).
_F16 = [1.349, 1.534, 1.578, 1.036, 1.543, 1.515, 0.868, 1.206, 0.936, 1.524, 1.473, 0.962, 0.927, 1.532, 0.954, 1.111]
PROBLEMS: dict[str, Problem] = {
    **{f"unit p={p} m={m} L={lim}": Problem(devices=p, microbatches=m, memory={"limit": lim})
       for p, m, lim in ((8, 32, 2), (8, 32, 4), (8, 32, 7), (16, 32, 8), (16, 32, 11), (16, 32, 12))},
    "uncapped uneven p=8 m=32 v=2 span": Problem(
        devices=8, microbatches=32, stages_per_device=2, objective="stage_span",
        costs={"forward": _F16, "backward_input": [round(1.05 * x, 3) for x in _F16],
               "backward_weight": [round(0.7 * x, 3) for x in _F16]}),
    "uncapped uneven p=8 m=16": Problem(
        devices=8, microbatches=16,
        costs={"forward": _F16[:8], "backward_input": [round(1.05 * x, 3) for x in _F16[:8]],
               "backward_weight": [round(0.7 * x, 3) for x in _F16[:8]], "comm": 0.05}),
    "zb 1.5B m=24 2p": CASES[0].problem(2),
    "zb 1.5B m=32 2p": CASES[1].problem(2),
    "zb 6.2B m=32 2p": CASES[4].problem(2),
    "zb 14.6B m=48 2p": CASES[6].problem(2),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=2.0)
    ap.add_argument("--only", default="", help="run only the problems whose name contains this")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "cpsat_dtime.md")
    args = ap.parse_args(argv)
    solves: list[tuple[float, cp_model.CpSolver, int]] = []
    original = cp_model.CpSolver.solve

    def logged(self: cp_model.CpSolver, model: cp_model.CpModel, *rest, **kw) -> int:
        t0 = time.perf_counter()
        status = original(self, model, *rest, **kw)
        solves.append((time.perf_counter() - t0, self, status))
        return status

    cp_model.CpSolver.solve = logged  # type: ignore[method-assign]
    load_before = os.getloadavg()[0]
    rows = []
    for name, problem in PROBLEMS.items():
        if args.only not in name:
            continue
        solves.clear()
        sched = solve(problem, "auto", SolveOptions(time_limit_s=args.time_limit))
        if not solves:
            rows.append(f"| {name} | - | - | - | - | - | no CP-SAT search | {sched.status} |")
        for wall, solver, status in solves:
            prm, dtime = solver.parameters, solver.response_proto.deterministic_time
            stopped = ("proof" if status == cp_model.OPTIMAL else
                       "dtime" if dtime >= prm.max_deterministic_time * 0.999 else "wall")
            rows.append(f"| {name} | {'no' if prm.linearization_level == 0 else 'yes'} | {wall:.2f} | {dtime:.3f} | "
                        f"{dtime / max(wall, 1e-9):.3f} | {prm.max_deterministic_time:.3f} | {stopped} | "
                        f"{sched.status} |")
            print(rows[-1], file=sys.stderr, flush=True)
    load_after = os.getloadavg()[0]
    command = command_line("cpsat_dtime.py", argv)
    text = (
        "# CP-SAT deterministic time against wall time\n\n"
        f"Made by `{command}` (`auto`, time limit {args.time_limit:g} s; every CP-SAT solve it makes). "
        f"Load average {load_before:.1f} before, {load_after:.1f} after (2 cores). 'stopped by': proof, the "
        "deterministic limit (repeatable) or the wall clock (may not repeat).\n\n"
        "| problem | LP | wall (s) | dtime | dtime per s | dtime limit | stopped by | answer |\n"
        "|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n"
    )
    publish(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

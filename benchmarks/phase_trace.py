"""Where ``auto``'s limit goes, phase by phase: each phase's wall and CPU seconds beside what it was counted.

The 75% rule reads the wall on an idle machine, but ``auto`` decides from counted seconds (so an answer
repeats): where a phase is counted more than it takes, the limit is left unused; where it is counted less,
the wall-clock net cuts a later phase. This shows which phase does which on a given machine.

    python benchmarks/phase_trace.py                                   # four development rows above 4000 ops, 10 s
    python benchmarks/phase_trace.py --set tuning --cases 24,27 --time-limit 60

"counted" is the idle-machine seconds a phase added to what ``auto`` counts (its charges halved, as
:func:`pipesched.solver.budget.limit.idle_seconds` reads them, plus what it recorded; the final phases
charge idle seconds directly). Phases under 0.05 s of wall are left out. Writes
``benchmarks/results/phase_trace.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cases as case_sets  # noqa: E402
from report import command_line, publish  # noqa: E402

from pipesched.solver import Instance, SolveOptions, solve  # noqa: E402
from pipesched.solver.budget import SHARED_SLOWDOWN  # noqa: E402
from pipesched.solver.heuristics import search  # noqa: E402
from pipesched.solver.portfolio import auto, candidates  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_CASES = "4,6,16,17"  # development rows above 4000 ops: loop v2 and v4, both caps' ends
_ROWS: list[str] = []


def _traced(run_phases):  # type: ignore[no-untyped-def]
    def run(phases, s):  # type: ignore[no-untyped-def]
        for phase in phases:
            t, c = time.perf_counter(), time.process_time()
            spent, recorded = s.budget.spent, s.budget.unplanned
            run_phases((phase,), s)
            wall = time.perf_counter() - t
            if wall < 0.05:
                continue
            charged = s.budget.spent - spent
            counted = (charged if phases is auto.FINAL else charged / SHARED_SLOWDOWN) + s.budget.unplanned - recorded
            _ROWS.append(f"| | {phase.name} | {wall:.2f} | {time.process_time() - c:.2f} | {counted:.2f} |")
    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=("tuning", "development"), default="development")
    ap.add_argument("--cases", default=DEFAULT_CASES, help="comma-separated indices into the set")
    ap.add_argument("--time-limit", type=float, default=10.0)
    args = ap.parse_args(argv)
    traced = _traced(search.run_phases)
    for module in (search, auto, candidates):
        module.run_phases = traced  # type: ignore[attr-defined]
    pool = case_sets.tuning() if args.set == "tuning" else case_sets.development()
    for k in (int(x) for x in args.cases.split(",")):
        case = pool[k]
        ops = Instance.from_problem(case.problem).num_ops
        at, t = len(_ROWS), time.perf_counter()
        got = solve(case.problem, "auto", SolveOptions(time_limit_s=args.time_limit))
        wall = time.perf_counter() - t
        note = " (wall cut)" if got.reason and "wall clock" in got.reason else ""
        _ROWS.insert(at, f"| **{case.name}** ({ops} ops) | answer {got.objective_value:.6g} {got.status[:3]}"
                         f"{note} | **{wall:.2f}** | | |")
        print("\n".join(_ROWS[at:]), file=sys.stderr, flush=True)
    text = (f"# Where `auto`'s limit goes, phase by phase ({args.time_limit:g} s)\n\n"
            f"Made by `{command_line('phase_trace.py', argv)}`. Wall and CPU seconds of each phase beside the "
            "idle seconds it was counted; the case's line gives the answer and the whole solve's wall.\n\n"
            "| case | phase | wall (s) | CPU (s) | counted (s) |\n|---|---|---|---|---|\n" + "\n".join(_ROWS) + "\n")
    publish(text, RESULTS / "phase_trace.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())

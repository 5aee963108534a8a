"""``auto`` on the TUNING and HELD-OUT sets side by side (issue 16 item 2; docs/heldout.md).

The held-out set (``benchmarks/cases.py``) was never used to choose a constant, so its rows are the
figures a solver claim may rest on; the tuning set beside it shows how much the tuning flatters.
Per case: ``auto``'s objective at a ``--time-limit`` (default 10 s), its proven lower bound, the
gap ``(objective - bound) / objective``, the status, the best classic recipe that fits the memory
limit (every registered method except ``auto``, ``cpsat``, ``ilp`` and ``greedy``), auto's
objective over that recipe's, the wall time, and the phases the wall clock cut (then the row
depends on the machine's load, not only on the solver). Each set ends with a summary row.

    python benchmarks/heldout.py [--per-set N] [--time-limit 10] [--out benchmarks/results/heldout.md]

``--per-set N`` runs the first N cases of each set (``run_all.py --quick`` uses 6); default all 24.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from pipesched.solver import NotApplicableError, Problem, SolveOptions, methods, solve

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import Case, heldout, tuning  # noqa: E402
from report import command_line, publish  # noqa: E402

NOT_RECIPES = ("auto", "cpsat", "ilp", "greedy")


@dataclass(frozen=True)
class Row:
    case: Case
    objective: float
    bound: float
    status: str
    recipe: str  # name of the best recipe that fits, or "none"
    recipe_value: float  # inf when none fits
    wall: float
    cut: str  # the phases the wall clock ended (from the schedule's reason), "" when none

    @property
    def gap(self) -> float:
        return max(0.0, (self.objective - self.bound) / self.objective)

    @property
    def vs_recipe(self) -> float:
        return self.objective / self.recipe_value if math.isfinite(self.recipe_value) else math.nan


def best_recipe(problem: Problem) -> tuple[str, float]:
    """(name, objective) of the best fixed recipe that schedules ``problem`` within its memory limit."""
    best = ("none", math.inf)
    for m in methods():
        if m.name in NOT_RECIPES or m.applies(problem):
            continue
        try:
            value = solve(problem, m.name).objective_value
        except (NotApplicableError, ValueError):
            continue
        if value is not None and value < best[1]:
            best = (m.name, value)
    return best


def run(case: Case, time_limit: float) -> Row:
    t0 = time.perf_counter()
    sched = solve(case.problem, "auto", SolveOptions(time_limit_s=time_limit))
    wall = time.perf_counter() - t0
    recipe, value = best_recipe(case.problem)
    assert sched.objective_value is not None and sched.lower_bound is not None, case.name
    reason = sched.reason or ""
    cut = reason.split("ended: ", 1)[1].split(" (on a less", 1)[0] if "wall clock" in reason else ""
    return Row(case, sched.objective_value, sched.lower_bound, sched.status, recipe, value, wall, cut)


def table(title: str, rows: list[Row]) -> list[str]:
    out = [f"## {title}", "",
           "| case | objective | bound | gap (%) | status | best recipe | recipe value | auto / recipe | wall (s) "
           "| cut by the wall clock |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r.vs_recipe:.3f}" if math.isfinite(r.vs_recipe) else "-"
        rv = f"{r.recipe_value:.1f}" if math.isfinite(r.recipe_value) else "-"
        out.append(f"| {r.case.name} | {r.objective:.1f} | {r.bound:.1f} | {100 * r.gap:.2f} | {r.status} | "
                   f"{r.recipe} | {rv} | {ratio} | {r.wall:.1f} | {r.cut or '-'} |")
    ratios = [r.vs_recipe for r in rows if math.isfinite(r.vs_recipe)]
    out += ["", summary(rows, ratios), ""]
    return out


def summary(rows: list[Row], ratios: list[float]) -> str:
    gaps = [r.gap for r in rows]
    geo = math.exp(statistics.fmean(math.log(x) for x in ratios)) if ratios else math.nan
    return (f"Summary: {len(rows)} cases; {sum(r.status == 'optimal' for r in rows)} optimal; gap mean "
            f"{100 * statistics.fmean(gaps):.2f}%, median {100 * statistics.median(gaps):.2f}%, max "
            f"{100 * max(gaps):.2f}%; auto / best recipe geometric mean {geo:.3f} over {len(ratios)} cases "
            f"with a recipe that fits ({sum(x < 1 - 1e-9 for x in ratios)} better, "
            f"{sum(x > 1 + 1e-9 for x in ratios)} worse); wall max {max(r.wall for r in rows):.1f} s; "
            f"{sum(bool(r.cut) for r in rows)} runs had a phase cut by the wall clock (load).")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-set", type=int, default=24, help="first N cases of each set (1..24)")
    ap.add_argument("--time-limit", type=float, default=10.0, help="auto's time limit per case (s)")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "heldout.md")
    args = ap.parse_args(argv)
    if not 1 <= args.per_set <= 24:
        ap.error(f"--per-set: {args.per_set} is not in 1..24")
    sets = {}
    for title, cases in (("Tuning set (constants were chosen on these)", tuning()),
                         ("Held-out set (never used to choose anything)", heldout())):
        sets[title] = []
        for case in cases[: args.per_set]:
            sets[title].append(run(case, args.time_limit))
            r = sets[title][-1]
            print(f"{case.name}: {r.objective:.1f} bound {r.bound:.1f} {r.status} {r.wall:.1f}s", file=sys.stderr)
    lines = ["# auto on the tuning and held-out sets", "",
             f"Made by `{command_line('heldout.py', argv)}` (auto at {args.time_limit:g} s per case; "
             f"first {args.per_set} cases of each set of `benchmarks/cases.py`, docs/heldout.md). "
             "Gap = (objective - bound) / objective; 'auto / recipe' < 1 means auto is better than "
             "every classic recipe that fits the memory limit.", ""]
    for title, rows in sets.items():
        lines += table(title, rows)
    publish("\n".join(lines), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

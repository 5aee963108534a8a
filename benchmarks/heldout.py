"""``auto`` on the held-out set, or on the tuning and development sets side by side (docs/heldout.md).

``--set heldout``: the 24 cases of ``benchmarks/heldout_cases.json``, drawn once from models and
depths no solver change was made on; its rows are the figures a solver claim may rest on. No solver
change is made because of what they show; once they have been looked at for design, a new set is
drawn. ``--set development`` (the default): the tuning set and the development set of
``benchmarks/cases.py`` (the set once called held-out, no longer blind) side by side, which shows
how much the tuning flatters.

Per case: ``auto``'s objective at a ``--time-limit`` (default 10 s), its proven lower bound, the
gap ``(objective - bound) / objective``, the status, the best classic recipe that fits the memory
limit (every registered method except ``auto``, ``cpsat``, ``ilp`` and ``greedy``), auto's
objective over that recipe's, the wall time, and the phases the wall clock cut (then the row
depends on the machine's load, not only on the solver). ``auto`` runs every recipe itself, so it is
never worse than the best one by construction; what it adds is counted as "better" only where the
ratio shows it at the table's precision (below 0.9995). Each set ends with a summary row, and the
JSON beside the page carries it per set (``figures``).

    python benchmarks/heldout.py --set heldout [--time-limit 10]       # -> results/heldout.md
    python benchmarks/heldout.py [--per-set N] [--time-limit 10]       # -> results/development.md

``--per-set N`` runs the first N cases of each set (``run_all.py --quick`` uses 6); default all 24.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from pipesched.solver import NotApplicableError, Problem, SolveOptions, methods, solve

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import Case, development, tuning  # noqa: E402
from report import command_line, publish  # noqa: E402

NOT_RECIPES = ("auto", "cpsat", "ilp", "greedy")
HELDOUT_FILE = Path(__file__).resolve().parent / "heldout_cases.json"
RESULTS = Path(__file__).resolve().parent / "results"
#: auto / recipe below this is "better", above ``2 - BETTER`` "worse": a difference the table's three
#: decimals show.
BETTER = 0.9995


def heldout() -> list[Case]:
    """The held-out set, as drawn once into ``benchmarks/heldout_cases.json``."""
    record = json.loads(HELDOUT_FILE.read_text())
    return [Case(c["name"], c["model"], c["cap_factor"], Problem.model_validate(c["problem"])) for c in record["cases"]]


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
    out += ["", summary(rows), ""]
    return out


def figures(rows: list[Row]) -> dict[str, float | int]:
    """The set's summary: what the README quotes (``benchmarks/results/*.json`` ``figures``)."""
    gaps = [r.gap for r in rows]
    ratios = [r.vs_recipe for r in rows if math.isfinite(r.vs_recipe)]
    geo = math.exp(statistics.fmean(math.log(x) for x in ratios)) if ratios else math.nan
    better = sum(x < BETTER for x in ratios)
    worse = sum(x > 2 - BETTER for x in ratios)
    return {"cases": len(rows), "optimal": sum(r.status == "optimal" for r in rows),
            "gap_mean_pct": round(100 * statistics.fmean(gaps), 2),
            "gap_median_pct": round(100 * statistics.median(gaps), 2), "gap_max_pct": round(100 * max(gaps), 2),
            "with_recipe": len(ratios), "better": better, "equal": len(ratios) - better - worse, "worse": worse,
            "geomean_vs_recipe": round(geo, 3), "wall_max_s": round(max(r.wall for r in rows), 1),
            "wall_cut_runs": sum(bool(r.cut) for r in rows)}


def summary(rows: list[Row]) -> str:
    f = figures(rows)
    return (f"Summary: {f['cases']} cases; {f['optimal']} optimal; gap mean {f['gap_mean_pct']:.2f}%, median "
            f"{f['gap_median_pct']:.2f}%, max {f['gap_max_pct']:.2f}%; auto / best recipe geometric mean "
            f"{f['geomean_vs_recipe']:.3f} over {f['with_recipe']} cases with a recipe that fits ({f['better']} "
            f"better, {f['equal']} equal at three decimals, {f['worse']} worse); wall max {f['wall_max_s']:.1f} s; "
            f"{f['wall_cut_runs']} runs had a phase cut by the wall clock (load).")


SETS = {
    "heldout": (("heldout", "Held-out set (drawn once; no solver change is made because of it)", heldout),),
    "development": (("tuning", "Tuning set (constants were chosen on these)", tuning),
                    ("development", "Development set (once called held-out; solver changes followed its results)",
                     development)),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=sorted(SETS), default="development",
                    help="heldout: benchmarks/heldout_cases.json; development: the tuning and development sets")
    ap.add_argument("--per-set", type=int, default=24, help="first N cases of each set (1..24)")
    ap.add_argument("--time-limit", type=float, default=10.0, help="auto's time limit per case (s)")
    ap.add_argument("--out", type=Path, help="results file (default results/heldout.md or results/development.md)")
    args = ap.parse_args(argv)
    if not 1 <= args.per_set <= 24:
        ap.error(f"--per-set: {args.per_set} is not in 1..24")
    out = args.out or RESULTS / f"{args.set}.md"
    done: dict[str, tuple[str, list[Row]]] = {}
    for key, title, cases in SETS[args.set]:
        rows = done.setdefault(key, (title, []))[1]
        for case in cases()[: args.per_set]:
            rows.append(run(case, args.time_limit))
            r = rows[-1]
            print(f"{case.name}: {r.objective:.1f} bound {r.bound:.1f} {r.status} {r.wall:.1f}s", file=sys.stderr)
    source = ("`benchmarks/heldout_cases.json`" if args.set == "heldout" else
              f"first {args.per_set} cases of each set of `benchmarks/cases.py`")
    lines = [f"# auto on the {'held-out set' if args.set == 'heldout' else 'tuning and development sets'}", "",
             f"Made by `{command_line('heldout.py', argv)}` (auto at {args.time_limit:g} s per case; {source}; "
             "docs/heldout.md). Gap = (objective - bound) / objective; 'auto / recipe' < 1 means auto is better "
             "than every classic recipe that fits the memory limit (auto runs them all, so it is never above 1; "
             f"'better' counts ratios below {BETTER}).", ""]
    for title, rows in done.values():
        lines += table(title, rows)
    publish("\n".join(lines), out, figures={key: figures(rows) for key, (_, rows) in done.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())

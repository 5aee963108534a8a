"""``auto`` against the zero-bubble authors' heuristics and torch 2.13's orders, case by case.

References (each order timed on the same problem with our timing, dropped when over the cap or
deadlocked): the authors' automatic ZB-1p / ZB-2p heuristic (loop, v = 1), their v0.1.0 ZB-V
generator and their later V auto-schedule (V placement), rewritten in ``benchmarks/zb_references/``;
torch's orders where they apply
(``benchmarks/torch_orders.py``: interleaved orders for loop v >= 2, ZBV and DualPipeV for V). Then
``auto`` at ``--time-limit`` (default 10 s); vs best = (auto - best reference) / best reference,
negative when auto is better; "worse" counts cases above the reference by more than 1e-6 relative.

``--paper`` adds the faithfulness check: the ZB-1p / ZB-2p heuristic's bubble on the zero-bubble
paper's cases (``benchmarks/zb_paper.py``: Table 6 profiles, limits p and 2p x M_B, stage span)
beside the paper's Table 5 rates.

    python benchmarks/zb_reference_table.py [--time-limit 10] [--paper]   # tuning set -> results/zb_references.md
    python benchmarks/zb_reference_table.py --heldout                      # -> results/zb_references_heldout.md
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from pipesched.solver import Instance, SolveOptions, solve
from pipesched.solver.core.metrics import bubble_ratio

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch_orders  # noqa: E402
import zb_paper  # noqa: E402
from cases import Case, tuning  # noqa: E402
from heldout import heldout  # noqa: E402
from report import command_line, publish  # noqa: E402
from zb_references import v_auto, zb_auto, zbv  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
#: auto above the best reference by more than this (relative) counts as worse.
WORSE = 1e-6


def _cell(t: torch_orders.Timed | None) -> str:
    return "-" if t is None else f"{t.objective:.2f}"


def row(case: Case, time_limit: float) -> tuple[str, float | None]:
    """One table line, and auto's relative difference to the best reference (None without one)."""
    prob = case.problem
    t0 = time.perf_counter()
    zb, v, va = zb_auto.zb_auto(prob), zbv.zbv(prob), v_auto.v_auto(prob)
    torch_best = min(torch_orders.torch_candidates(prob), key=lambda t: t.objective, default=None)
    ref_s = time.perf_counter() - t0
    refs = [t for t in (zb, v, va, torch_best) if t is not None]
    best = min(refs, key=lambda t: t.objective, default=None)
    t0 = time.perf_counter()
    got = solve(prob, "auto", SolveOptions(time_limit_s=time_limit))
    wall = time.perf_counter() - t0
    val = got.objective_value
    vs = None if best is None or val is None else (val - best.objective) / best.objective
    torch_cell = "-" if torch_best is None else f"{torch_best.objective:.2f} ({torch_best.name})"
    line = (f"| {case.name} | {_cell(zb)} | {_cell(v)} | {_cell(va)} | {torch_cell} | "
            f"{'-' if val is None else f'{val:.2f}'} {got.status[:3]} | "
            f"{'-' if vs is None else f'{100 * vs:+.3f}%'} | {wall:.1f} | {ref_s:.1f} |")
    print(line, flush=True)
    return line, vs


def paper_check() -> tuple[list[str], int, int]:
    """The heuristic's ZB-1p / ZB-2p bubble on the paper's cases beside Table 5 (lines, matches, cases)."""
    lines = ["## Faithfulness: the ZB-1p / ZB-2p heuristic on the zero-bubble paper's cases", "",
             "Bubble = 1 - m(F+B+W) / stage span of the rewritten heuristic's best variant; paper = Table 5.", "",
             "| model | p | m | limit | paper | ours | match (4 decimals) |", "|---|---|---|---|---|---|---|"]
    hits = total = 0
    for c in zb_paper.CASES:
        for factor, paper in ((1, c.zb1p), (2, c.zb2p)):
            prob = c.problem(factor)
            t = zb_auto.zb_auto(prob)
            ours = None if t is None else round(bubble_ratio(Instance.from_problem(prob), t.objective), 4)
            ok = ours is not None and abs(ours - paper) < 5e-5
            hits, total = hits + ok, total + 1
            lines.append(f"| {c.model} | {c.p} | {c.m} | {factor}p | {paper:.4f} | "
                         f"{'-' if ours is None else f'{ours:.4f}'} | {'yes' if ok else 'no'} |")
            print(lines[-1], flush=True)
    return [*lines, "", f"{hits} of {total} match.", ""], hits, total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=10.0, help="auto's time limit per case (s)")
    ap.add_argument("--heldout", action="store_true", help="the held-out set instead of the tuning set")
    ap.add_argument("--paper", action="store_true", help="add the check against the paper's bubble rates")
    ap.add_argument("--cases", default="", help="comma-separated case indices (default all)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    chosen = heldout() if args.heldout else tuning()
    if args.cases:
        chosen = [chosen[int(i)] for i in args.cases.split(",")]
    out = args.out or RESULTS / ("zb_references_heldout.md" if args.heldout else "zb_references.md")
    lines = [f"# auto against the zero-bubble authors' heuristics and torch's orders "
             f"({'held-out' if args.heldout else 'tuning'} set)", "",
             f"Made by `{command_line('zb_reference_table.py', argv)}`: auto at {args.time_limit:g} s; references "
             "timed on the same problem within the cap (`-`: does not apply or builds nothing within the cap). "
             "vs best = (auto - best reference) / best reference. ref s = seconds to build and time the references.",
             "",
             *([f"Measured with the load average at {os.getloadavg()[0]:.1f} (above 2.5): walls are inflated and "
                "searches cut by the wall clock may end worse than on an idle machine.", ""]
               if os.getloadavg()[0] > 2.5 else []),
             "| case | ZB auto (authors) | ZB-V generator (authors) | V auto-schedule (authors) | best torch order | auto "
             "| vs best | wall (s) | ref s |", "|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    diffs = []
    for case in chosen:
        line, vs = row(case, args.time_limit)
        lines.append(line)
        if vs is not None:
            diffs.append(vs)
    worse = sum(d > WORSE for d in diffs)
    better = sum(d < -WORSE for d in diffs)
    figures: dict[str, float | int] = {
        "cases": len(chosen), "with_reference": len(diffs), "better": better, "equal": len(diffs) - better - worse,
        "worse": worse, "worst_pct": round(100 * max(diffs, default=0.0), 3)}
    lines += ["", f"Summary: {len(chosen)} cases, {len(diffs)} with a reference: auto better on {better}, equal on "
              f"{figures['equal']}, worse on {worse} (worst {figures['worst_pct']:+.3f}%).", ""]
    if args.paper:
        more, hits, total = paper_check()
        lines += more
        figures.update(paper_matches=hits, paper_cases=total)
    publish("\n".join(lines), out, figures=figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())

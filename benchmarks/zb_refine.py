"""The zero-bubble grid with and without the scale search after it, on the development set.

For each case and each nominal limit, the heuristic's best objective from the grid alone and from the
grid followed by :mod:`pipesched.solver.heuristics.zb_refine` (the search's trial count follows the
budget, exactly as ``auto`` sizes it). Deterministic: no clock decides anything, so the load does not
change the figures. ``--set tuning`` for the tuning set; the zero-bubble paper's p = 32 cases are
``--paper``.

    python benchmarks/zb_refine.py                # development set, limits 10 and 60 s
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cases import Case, development, tuning
from report import command_line, publish

from pipesched.solver import Instance
from pipesched.solver.budget import grid_seconds
from pipesched.solver.heuristics import zero_bubble as zb


def best(inst: Instance, seconds: float, search: bool) -> float | None:
    original = zb.refine_trials
    if not search:
        zb.refine_trials = lambda *args: 0
    try:
        cands = zb.zb_candidates(inst, seconds)
    finally:
        zb.refine_trials = original
    return cands[0].objective if cands else None


def paper_cases() -> list[Case]:
    from zb_paper import CASES
    return [Case(f"paper {c.model} p{c.p} m{c.m} 2p", c.model, 2.0, c.problem(2)) for c in CASES if c.p == 32]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=("development", "tuning"), default="development")
    ap.add_argument("--paper", action="store_true", help="the zero-bubble paper's p = 32 cases instead")
    ap.add_argument("--limits", default="10,60")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "zb_refine.md")
    args = ap.parse_args(argv)
    cases = paper_cases() if args.paper else development() if args.set == "development" else tuning()
    load = os.getloadavg()
    rows, summary = [], []
    for limit in (float(x) for x in args.limits.split(",")):
        gains = []
        for case in cases:
            inst = Instance.from_problem(case.problem)
            seconds = grid_seconds(inst, limit)
            grid, searched = best(inst, seconds, False), best(inst, seconds, True)
            if grid is None or searched is None:
                continue
            gains.append(100 * (grid - searched) / grid)
            rows.append(f"| {limit:g} | {case.name} | {inst.num_ops} | {grid:.2f} | {searched:.2f} | {gains[-1]:.3f} |")
            print(rows[-1], file=sys.stderr, flush=True)
        improved = sum(g > 1e-9 for g in gains)
        summary.append(f"- {limit:g} s: improved {improved} of {len(gains)} cases, mean gain {sum(gains) / len(gains):.3f}%, "
                       f"largest {max(gains):.3f}%, never worse (the search only adds candidates)")
    which = "the zero-bubble paper's p = 32 cases (2p)" if args.paper else f"the {args.set} set"
    text = (f"# Zero-bubble grid: the scale search after it\n\nMade by `{command_line('zb_refine.py', argv)}` on "
            f"{which}. Best objective of the zero-bubble heuristic from the grid alone and with the scale "
            "search after it, as `auto` sizes both for each nominal limit; gain = how much lower, in %.\n\n"
            + "\n".join(summary) + "\n\n| limit (s) | case | ops | grid alone | grid + search | gain (%) |\n"
            "|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")
    publish(text, args.out, load)
    return 0


if __name__ == "__main__":
    sys.exit(main())

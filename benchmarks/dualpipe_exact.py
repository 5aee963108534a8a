"""What ``cpsat`` proves on problems with overlapped F&B pairs (``costs.overlap_fb``), at which size
(issue 14).

Why: the paired CP-SAT model (``solver/exact/cpsat/overlap.py``) has one Boolean per candidate pair of
an F and a B on one device, so its size grows with (ops per device)^2; this table shows where it still
proves optimality, where it only improves on the recipe, and where it stops at the recipe.

Model as in ``benchmarks/dualpipe.py``: F = 1, b = 1.5, w = 0.5 per model stage (V: half-stage chunks),
comm 0.05, activations +1 per F released by W (V: 0.5), ``overlap_fb`` 0.7. Dual placement at p = 2
and 4 with no cap and with DualPipe's own peak ``p + 1`` as the cap; V placement without a cap.

Columns: ops; candidate pairs (every F x B of other microbatches on one device, then those whose start
windows meet within the recipe's makespan); the recipe (``dualpipe`` or ``dualpipe-v``); ``cpsat``
(objective, status, lower bound, gap to it, wall seconds); ``auto`` (which today returns the best of
the recipes and of its pair-free portfolio, without the paired model).

Run: ``python benchmarks/dualpipe_exact.py [--time-limit S] [--max-ops N] [--no-auto] [--out FILE]``
(default 10 s per solve, every row, ``benchmarks/results/dualpipe_exact.md``); the 60 s file is
``--time-limit 60 --max-ops 96 --no-auto --out benchmarks/results/dualpipe_exact_60s.md``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402

from pipesched.solver import Instance, Problem, SolveOptions, solve  # noqa: E402
from pipesched.solver.exact.cpsat.overlap import candidate_pairs, paired_scaling  # noqa: E402

OUT = Path(__file__).parent / "results" / "dualpipe_exact.md"
COSTS = {"forward": 1.0, "backward_input": 1.5, "backward_weight": 0.5}
COMM = 0.05
OVERLAP = 0.7

#: (placement, p, m, cap) rows; cap "p+1" is DualPipe's own activation peak.
CASES = [("dual", 2, 4, None), ("dual", 2, 4, "p+1"), ("dual", 2, 8, None), ("dual", 2, 8, "p+1"),
         ("dual", 4, 8, None), ("dual", 4, 8, "p+1"), ("dual", 4, 16, None), ("dual", 4, 16, "p+1"),
         ("v", 2, 4, None), ("v", 2, 8, None), ("v", 4, 8, None)]


def problem(placement: str, p: int, m: int, cap: str | None) -> Problem:
    scale = 1.0 if placement == "dual" else 0.5  # V chunks are half a model stage
    costs = {k: v * scale for k, v in COSTS.items()} | {"comm": COMM, "overlap_fb": OVERLAP}
    limit = None if cap is None else float(p + 1)
    return Problem(devices=p, microbatches=m, stages_per_device=2, placement=placement, costs=costs,
                   memory={"forward": scale, "backward_input": 0.0, "backward_weight": -scale, "limit": limit})


def row(placement: str, p: int, m: int, cap: str | None, limit_s: float, with_auto: bool) -> str:
    pr = problem(placement, p, m, cap)
    recipe_name = "dualpipe" if placement == "dual" else "dualpipe-v"
    recipe = solve(pr, recipe_name)
    inst = Instance.from_problem(pr)
    sc = paired_scaling(inst)
    every = len(candidate_pairs(inst, sc))
    kept = len(candidate_pairs(inst, sc, horizon=sc.up(recipe.makespan) + 1))
    t = time.perf_counter()
    exact = solve(pr, "cpsat", SolveOptions(time_limit_s=limit_s))
    wall = time.perf_counter() - t
    auto = solve(pr, "auto", SolveOptions(time_limit_s=limit_s)) if with_auto else None
    lb = exact.lower_bound or 0.0
    gap = (exact.objective_value - lb) / exact.objective_value if exact.objective_value else 0.0
    better = "yes" if exact.objective_value <= recipe.objective_value + 1e-9 else "NO"
    return (f"| {placement} | {p} | {m} | {cap or 'none'} | {pr.num_ops} | {every} / {kept} | "
            f"{recipe_name} {recipe.objective_value:.2f} | {exact.objective_value:.2f} | {exact.status} | "
            f"{lb:.2f} | {100 * gap:.1f}% | {wall:.1f} | {'–' if auto is None else f'{auto.objective_value:.2f} ({auto.status})'} | {better} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds per cpsat and per auto run")
    parser.add_argument("--max-ops", type=int, default=None, help="only the rows of at most this many ops")
    parser.add_argument("--no-auto", action="store_true", help="skip the auto column")
    parser.add_argument("--out", type=Path, default=OUT, help="results file")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    command = report.command_line("dualpipe_exact.py", argv)
    lines = [
        f"Made by `{command}`. Model: F = 1, b = 1.5, w = 0.5 per model stage (V: half-stage chunks), comm "
        f"{COMM}, costs.overlap_fb {OVERLAP}; activations +1 per F, released by W (V: 0.5); cap p+1 = DualPipe's "
        f"own peak. {args.time_limit:g} s per cpsat{'' if args.no_auto else ' and per auto'} solve; wall seconds are under the load below.",
        "",
        "| placement | p | m | cap | ops | pairs all / in window | recipe | cpsat | status | lower bound | gap "
        "| cpsat s | auto | cpsat ≤ recipe |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for case in CASES:
        if args.max_ops is not None and problem(*case).num_ops > args.max_ops:
            continue
        lines.append(row(*case, args.time_limit, not args.no_auto))
        print(lines[-1], flush=True)
    report.publish("\n".join(lines) + "\n", args.out, load_before)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

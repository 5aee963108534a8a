"""The ``ilp`` method on small and medium cases, CBC against HiGHS (and, with ``--cpsat``, CP-SAT).

For each case: the analytic lower bound, the best heuristic (the ILP's warm start), then per
backend the status, objective, proven bound and wall time under a time limit. Run:
``python benchmarks/ilp_backends.py [--time-limit S] [--cpsat]``; writes
``benchmarks/results/ilp_backends.md``. HiGHS needs ``pip install 'pipesched[highs]'``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pipesched.solver import Instance, Problem, SolveOptions, solve
from pipesched.solver.core.metrics import objective_value
from pipesched.solver.exact.ilp import backends as ilp_backends
from pipesched.solver.exact.ilp import method as ilp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import publish  # noqa: E402

UNEVEN3 = {"forward": [1.0, 2.0, 1.5], "backward_input": [1.0, 1.5, 2.0], "backward_weight": [0.5, 0.25, 0.75],
           "comm": 0.25}
UNEVEN4 = {"forward": [1, 2, 1.5, 1], "backward_input": [1, 1, 2, 1.2], "backward_weight": 0.7, "comm": 0.3}

CASES: list[tuple[str, dict]] = [
    ("p3 m3 uneven+comm, span", dict(devices=3, microbatches=3, costs=UNEVEN3, objective="stage_span")),
    ("p3 m4 uneven, limits [2,2,1], span", dict(devices=3, microbatches=4, costs=UNEVEN3,
                                                memory={"limit": [2, 2, 1]}, objective="stage_span")),
    ("p4 m6 unit, limit 2", dict(devices=4, microbatches=6, memory={"limit": 2})),
    ("p2 m3 v=2 loop, limit 3, span", dict(devices=2, microbatches=3, stages_per_device=2, memory={"limit": 3},
                                           objective="stage_span")),
    ("p2 m4 V fused, limit 3", dict(devices=2, microbatches=4, stages_per_device=2, placement="v",
                                    split_backward=False, memory={"limit": 3})),
    ("p4 m8 unit, limit 3", dict(devices=4, microbatches=8, memory={"limit": 3})),
    ("p4 m8 unit, limit 3, span", dict(devices=4, microbatches=8, memory={"limit": 3}, objective="stage_span")),
    ("p4 m8 uneven+comm, span", dict(devices=4, microbatches=8, costs=UNEVEN4, objective="stage_span")),
    ("p4 m6 V, limit 4", dict(devices=4, microbatches=6, stages_per_device=2, placement="v", memory={"limit": 4})),
]



def run(problem: Problem, method: str, backend: str | None, limit: float) -> str:
    t0 = time.perf_counter()
    s = solve(problem, method, SolveOptions(time_limit_s=limit, backend=backend))
    wall = time.perf_counter() - t0
    value = f"{s.objective_value:g}" if s.objective_value is not None else "-"
    bound = f"{s.lower_bound:.4g}" if s.lower_bound is not None else "-"
    return f"{s.status} | {value} | {bound} | {wall:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--time-limit", type=float, default=20.0)
    parser.add_argument("--cpsat", action="store_true", help="add a CP-SAT column")
    args = parser.parse_args()
    runs: list[tuple[str, str, str | None]] = [("ilp cbc", "ilp", "cbc")]
    if ilp_backends.highs_available():
        runs.append(("ilp highs", "ilp", "highs"))
    if args.cpsat:
        runs.append(("cpsat", "cpsat", None))
    head = "| case | ops | analytic bound | best heuristic | " + " | ".join(
        f"{name}: status | objective | bound | wall s" for name, _, _ in runs
    ) + " |"
    rows = [head, "|---" * (4 + 4 * len(runs)) + "|"]
    for name, kwargs in CASES:
        problem = Problem(**kwargs)
        inst = Instance.from_problem(problem)
        warm = ilp.warm_start(problem, inst, SolveOptions())
        heuristic = f"{objective_value(inst, warm):g}" if warm is not None else "none fits"
        cells = [run(problem, method, backend, args.time_limit) for _, method, backend in runs]
        rows.append(f"| {name} | {problem.num_ops} | {ilp.analytic_lower_bound(inst):g} | {heuristic} | "
                    + " | ".join(cells) + " |")
        print(rows[-1], flush=True)
    text = (
        "# ILP backends on small and medium cases\n\n"
        f"Made by `python benchmarks/ilp_backends.py --time-limit {args.time_limit:g}"
        f"{' --cpsat' if args.cpsat else ''}` on a shared, loaded 2-core machine (other sessions were "
        "running), so wall times are pessimistic. Status `optimal` means the solver proved it; `bound` is the "
        "proven lower bound (analytic and solver bounds combined).\n\n" + "\n".join(rows) + "\n"
    )
    publish(text, Path(__file__).parent / "results" / "ilp_backends.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())

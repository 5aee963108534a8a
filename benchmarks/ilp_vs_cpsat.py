"""Do ``ilp`` and ``cpsat`` agree on random small problems (p <= 3, m <= 4)? Who proves what, how fast?

Random problems (seeded): uneven per-stage costs, comm or not, memory limit or not, split or
fused backward, loop v = 1 or 2 or the V shape, either objective. Each is solved by both
methods; the row says whether their objectives agree and which one proved optimality. Run:
``python benchmarks/ilp_vs_cpsat.py [--seed N] [--cases N] [--time-limit S]``; writes
``benchmarks/results/ilp_vs_cpsat.md``.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

from pipesched.solver import Problem, SolveOptions, solve

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import publish  # noqa: E402


def random_problem(rng: random.Random) -> Problem:
    p = rng.choice([2, 3])
    v = rng.choice([1, 1, 2])
    m = rng.choice([2, 3, 4]) if v == 1 else rng.choice([2, 3])
    stages = p * v
    return Problem(
        devices=p, microbatches=m, stages_per_device=v,
        placement=rng.choice(["loop", "v"]) if v == 2 else "loop",
        split_backward=rng.random() < 0.6,
        costs={"forward": [rng.choice([0.5, 1, 1.5, 2]) for _ in range(stages)],
               "backward_input": [rng.choice([0.5, 1, 2]) for _ in range(stages)],
               "backward_weight": [rng.choice([0, 0.5, 1]) for _ in range(stages)],
               "comm": rng.choice([0, 0, 0.5])},
        memory={"limit": rng.choice([None, 2, 3, 4])},
        objective=rng.choice(["makespan", "stage_span"]),
    )


def describe(problem: Problem) -> str:
    shape = f"p{problem.devices} m{problem.microbatches} v{problem.stages_per_device} {problem.placement}"
    return (f"{shape}, {'split' if problem.split_backward else 'fused'}, comm {problem.costs.comm:g}, "
            f"limit {problem.memory.limit}, {problem.objective}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--cases", type=int, default=30)
    parser.add_argument("--time-limit", type=float, default=10.0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    rows = ["| # | problem | ilp status | ilp objective | ilp s | cpsat status | cpsat objective | cpsat s | agree |",
            "|---|---|---|---|---|---|---|---|---|"]
    agree, proved = 0, {"ilp": 0, "cpsat": 0}
    for k in range(args.cases):
        problem = random_problem(rng)
        out = {name: solve(problem, name, SolveOptions(time_limit_s=args.time_limit)) for name in ("ilp", "cpsat")}
        a, b = out["ilp"], out["cpsat"]
        same = (a.status == b.status == "infeasible") or (
            a.objective_value is not None and b.objective_value is not None
            and abs(a.objective_value - b.objective_value) <= 1e-6 * max(1.0, a.objective_value)
        )
        agree += same
        for name, s in out.items():
            proved[name] += s.status in ("optimal", "infeasible")
        rows.append(f"| {k} | {describe(problem)} | {a.status} | {a.objective_value} | {a.solve_time_s:.2f} | "
                    f"{b.status} | {b.objective_value} | {b.solve_time_s:.2f} | {'yes' if same else '**NO**'} |")
        print(rows[-1], flush=True)
    summary = (f"{agree}/{args.cases} agree; proven (optimal or infeasible) within {args.time_limit:g} s: "
               f"ilp {proved['ilp']}/{args.cases}, cpsat {proved['cpsat']}/{args.cases}.")
    text = (
        "# ilp vs cpsat on random small problems\n\n"
        f"Made by `python benchmarks/ilp_vs_cpsat.py --seed {args.seed} --cases {args.cases} "
        f"--time-limit {args.time_limit:g}` (machine and load: see the header).\n\n"
        f"{summary}\n\n" + "\n".join(rows) + "\n"
    )
    publish(text, Path(__file__).parent / "results" / "ilp_vs_cpsat.md")
    return 0 if agree == args.cases else 1


if __name__ == "__main__":
    sys.exit(main())

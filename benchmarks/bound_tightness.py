"""How close the analytic lower bound is to the brute-forced optimum on random tiny problems.

Compares the subset bounds of ``pipesched.solver.bounds`` with the simpler first bounds (head +
work + tail per device and one microbatch's round trip for makespan; work and the smallest round
trip for stage span). The random problems include memory limits, which no analytic bound sees,
so some gap always remains. Run: ``python benchmarks/bound_tightness.py``; writes
``benchmarks/results/bound_tightness.md``.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "solver"))

from bruteforce import optimum  # noqa: E402
from test_bounds import _random_problem  # noqa: E402

from pipesched.solver import Instance  # noqa: E402
from pipesched.solver.bounds.analytic import head_work_tail_bound, lower_bound, round_trip

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import publish  # noqa: E402

COMMAND = "python benchmarks/bound_tightness.py"
OUT = Path(__file__).parent / "results" / "bound_tightness.md"
SEED, ROUNDS = 11, 150


def first_bound(inst: Instance) -> float:
    if inst.objective == "makespan":
        return head_work_tail_bound(inst)
    work = inst.device_work()
    return max(max(work[d], min(round_trip(inst, s) for s in stages))
               for d, stages in enumerate(inst.stages_of_device) if stages)


def main() -> int:
    rng = random.Random(SEED)
    stats = {obj: {"cases": 0, "tight": 0, "first_tight": 0, "gap": 0.0, "first_gap": 0.0}
             for obj in ("makespan", "stage_span")}
    for _ in range(ROUNDS):
        for objective, s in stats.items():
            problem = _random_problem(rng, objective)
            best = optimum(problem)
            if best is None or best <= 0:
                continue
            inst = Instance.from_problem(problem)
            new, old = lower_bound(inst), first_bound(inst)
            s["cases"] += 1
            s["tight"] += abs(new - best) <= 1e-9
            s["first_tight"] += abs(old - best) <= 1e-9
            s["gap"] += (best - new) / best
            s["first_gap"] += (best - old) / best
    lines = [
        f"Made by `{COMMAND}` (seed {SEED}; random tiny problems of `tests/solver/test_bounds.py`,",
        "brute-forced optima; limits included, which analytic bounds ignore).",
        "",
        "| objective | cases | bound = optimum | mean gap | first bound = optimum | first bound mean gap |",
        "|---|---|---|---|---|---|",
    ]
    for objective, s in stats.items():
        n = s["cases"]
        lines.append(f"| {objective} | {n} | {s['tight']} | {s['gap'] / n:.1%} | {s['first_tight']} | "
                     f"{s['first_gap'] / n:.1%} |")
    text = "\n".join(lines) + "\n"
    publish(text, OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Greedy list scheduler speed on large problems (it is the warm start of the exact solvers).

Times ``greedy_order`` per policy and the whole ``greedy`` method (best of all policies, plus
simulation and validation) for p = 32, m = 256 (24,576 ops) and a few other shapes. Reports
microseconds per op so the figure is comparable across shapes. Run:
``python benchmarks/greedy_speed.py``; writes ``benchmarks/results/greedy_speed.md``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from pipesched.solver import Instance, Problem, simulate, solve
from pipesched.solver.core.metrics import makespan, peak_memory
from pipesched.solver.heuristics.greedy import POLICIES, greedy_order

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import publish  # noqa: E402

CASES = [
    ("p32 m256 v1, no limit", Problem(devices=32, microbatches=256)),
    ("p32 m256 v1, limit 32", Problem(devices=32, microbatches=256, memory={"limit": 32})),
    ("p32 m256 v1, limit 63", Problem(devices=32, microbatches=256, memory={"limit": 63})),
    ("p16 m128 v2 loop, limit 40", Problem(devices=16, microbatches=128, stages_per_device=2, memory={"limit": 40})),
    ("p16 m128 V, limit 32", Problem(devices=16, microbatches=128, stages_per_device=2, placement="v",
                                     memory={"limit": 32})),
]


def best_of(fn, repeats: int = 3) -> tuple[float, float]:
    """Best wall-clock and best CPU seconds over ``repeats`` runs (CPU time is less hurt by load)."""
    wall, cpu = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return min(wall), min(cpu)


def main() -> int:
    rows = []
    for case, problem in CASES:
        inst = Instance.from_problem(problem)
        ops = problem.num_ops
        for policy in POLICIES:
            wall, cpu = best_of(lambda inst=inst, policy=policy: greedy_order(inst, policy=policy))
            order = greedy_order(inst, policy=policy)
            span = makespan(inst, simulate(inst, order))
            rows.append(f"| {case} | {ops} | {policy} | {wall:.3f} | {cpu:.3f} | {cpu / ops * 1e6:.1f} | {span:g} | "
                        f"{max(peak_memory(inst, order)):g} |")
        wall, cpu = best_of(lambda problem=problem: solve(problem, "greedy"), repeats=1)
        schedule = solve(problem, "greedy")
        rows.append(f"| {case} | {ops} | **greedy method** (all policies + finalize + validate) | {wall:.3f} | "
                    f"{cpu:.3f} | {cpu / ops * 1e6:.1f} | {schedule.makespan:g} | {max(schedule.peak_memory):g} |")
    table = "\n".join([
        "| case | ops | policy | wall s (best of 3) | CPU s (best of 3) | CPU µs per op | makespan | peak memory |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
    ])
    text = ("# Greedy scheduler speed\n\nMade by `python benchmarks/greedy_speed.py` on a shared, loaded "
            "2-core machine (other sessions were running), so absolute times are pessimistic.\n\n" + table + "\n")
    publish(text, Path(__file__).parent / "results" / "greedy_speed.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())

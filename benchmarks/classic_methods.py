"""Classic recipes and the greedy scheduler side by side (method x case).

For every case and every method that applies: makespan, per-device span (``stage_span``), bubble
ratio, the largest per-device activation peak, and the makespan the greedy scheduler reaches
when given that recipe's peak as ``memory.limit`` (how good a warm start it is under the same
memory). Run: ``python benchmarks/classic_methods.py``; writes ``benchmarks/results/classic_methods.md``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from pipesched.solver import NotApplicableError, Problem, get_method, solve

METHODS = ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zb-v", "dualpipe-v", "greedy")


def cases() -> dict[str, Problem]:
    uneven = [1.0] * 8
    uneven[0], uneven[-1] = 1.4, 1.8  # embedding on the first stage, LM head + loss on the last
    return {
        "p4 m8 uniform": Problem(devices=4, microbatches=8),
        "p8 m32 uniform": Problem(devices=8, microbatches=32),
        "p8 m32 fused": Problem(devices=8, microbatches=32, split_backward=False),
        "p8 m32 uneven+comm": Problem(
            devices=8, microbatches=32,
            costs={"forward": uneven, "backward_input": [2 * x for x in uneven], "backward_weight": uneven, "comm": 0.1},
        ),
        "p4 m16 v2 loop": Problem(devices=4, microbatches=16, stages_per_device=2),
        "p4 m16 v2 V": Problem(devices=4, microbatches=16, stages_per_device=2, placement="v"),
        "p8 m16 v2 V": Problem(devices=8, microbatches=16, stages_per_device=2, placement="v"),
    }


def main() -> int:
    rows = []
    for case, problem in cases().items():
        span_problem = problem.model_copy(update={"objective": "stage_span"})
        for name in METHODS:
            if get_method(name).applies(problem):
                continue
            t0 = time.perf_counter()
            schedule = solve(problem, name)
            elapsed = time.perf_counter() - t0
            span = solve(span_problem, name).objective_value
            peak = max(schedule.peak_memory)
            capped = problem.model_copy(update={"memory": problem.memory.model_copy(update={"limit": peak})})
            try:
                greedy = f"{solve(Problem.model_validate(capped.model_dump()), 'greedy').makespan:g}"
            except NotApplicableError:
                greedy = "n/a"
            rows.append(
                f"| {case} | {name} | {schedule.makespan:g} | {span:g} | {schedule.lower_bound:g} | "
                f"{schedule.bubble_ratio:.3f} | {peak:g} | {greedy} | {elapsed * 1000:.0f} |"
            )
    table = "\n".join(
        [
            "| case | method | makespan | stage_span | makespan bound | bubble | peak memory | greedy makespan at that peak | time (ms) |",
            "|---|---|---|---|---|---|---|---|---|",
            *rows,
        ]
    )
    text = (
        "# Classic recipes and greedy\n\n"
        "Made by `python benchmarks/classic_methods.py`. Costs default to F = B = W = 1 per stage "
        "unless the case says otherwise; memory deltas F +1, B 0, W -1; bubble is for the makespan "
        "objective. Times were measured on a shared, loaded 2-core machine.\n\n" + table + "\n"
    )
    print(text)
    out = Path(__file__).parent / "results" / "classic_methods.md"
    out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

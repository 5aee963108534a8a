"""Classic schedules against the analytic lower bounds (method x case).

For each case and each method that applies: makespan (earliest times), stage span (the same
method solved for the ``stage_span`` objective), bubble ratio of the makespan schedule, the
largest per-device activation peak, and the analytic lower bounds of both objectives
(``pipesched.solver.bounds``), so the distance of every recipe from what is provably possible
shows. Two-chunk methods (interleaved 1F1B, ZB-V, DualPipe-V) run the same model (same total
work) cut into ``2p`` stages of half the cost each and placed their way (loop or V), so with
uneven costs their per-device work, and hence their bounds, differ from the one-chunk rows.

Run: ``python benchmarks/classic_table.py``; writes ``benchmarks/results/classic.md``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pipesched.solver import Instance, NotApplicableError, Problem, solve
from pipesched.solver.bounds.analytic import makespan_lower_bound, stage_span_lower_bound

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import publish  # noqa: E402

COMMAND = "python benchmarks/classic_table.py"
OUT = Path(__file__).parent / "results" / "classic.md"
METHODS = ("gpipe", "1f1b", "zb-h1", "zb-h2", "greedy", "interleaved-1f1b", "zb-v", "dualpipe-v")
TWO_CHUNK = {"interleaved-1f1b": "loop", "zb-v": "v", "dualpipe-v": "v"}


def cases() -> dict[str, Problem]:
    out = {f"uniform p={p} m={m}": Problem(devices=p, microbatches=m) for p in (4, 8) for m in (8, 16, 32)}
    uneven = [1.0] * 8
    uneven[0], uneven[-1] = 1.5, 2.0  # embedding on the first stage, LM head and loss on the last
    out["uneven p=8 m=16 comm=0.1"] = Problem(
        devices=8, microbatches=16,
        costs={"forward": uneven, "backward_input": [2 * x for x in uneven], "backward_weight": uneven, "comm": 0.1},
    )
    # Qi et al. 2024 (zero bubble), 1.5B model on 8 GPUs, 24 microbatches: profiled times in ms
    out["ZB paper 1.5B p=8 m=24"] = Problem(
        devices=8, microbatches=24,
        costs={"forward": 18.522, "backward_input": 18.086, "backward_weight": 9.337, "comm": 0.601},
    )
    return out


def _halve(x: float | list[float]) -> list[float]:
    """Per-stage costs for the same model cut into twice as many stages (model order)."""
    values = x if isinstance(x, list) else [x]
    return [y / 2 for y in values for _ in range(2)] if isinstance(x, list) else x / 2


def two_chunk(problem: Problem, placement: str) -> Problem:
    c = problem.costs
    costs = {"forward": _halve(c.forward), "backward_input": _halve(c.backward_input),
             "backward_weight": _halve(c.backward_weight), "comm": c.comm}
    data = problem.model_dump()
    data.update(stages_per_device=2, placement=placement, costs=costs)
    data["memory"] = {"forward": 0.5, "backward_input": 0.0, "backward_weight": -0.5, "limit": None}
    return Problem.model_validate(data)


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def row(case: str, name: str, problem: Problem) -> str | None:
    try:
        sched = solve(problem, name)
        span = solve(problem.model_copy(update={"objective": "stage_span"}), name)
    except NotApplicableError:
        return None
    inst = Instance.from_problem(problem)
    return (f"| {case} | {name} | {_fmt(sched.makespan)} | {_fmt(span.objective_value)} | "
            f"{sched.bubble_ratio:.1%} | {_fmt(max(sched.peak_memory))} | "
            f"{_fmt(makespan_lower_bound(inst))} | {_fmt(stage_span_lower_bound(inst))} |")


def main() -> int:
    lines = [
        f"Made by `{COMMAND}`. Times in the problem's unit; bubble = 1 − work / (p × makespan);",
        "peak = the largest per-device activation peak (microbatch-stage units; two-chunk methods hold",
        "half a unit per chunk). Lower bounds are the analytic ones (`pipesched.solver.bounds`) of the",
        "case as the method sees it; two-chunk methods run the same model in 2p half-cost stages",
        "(loop placement for interleaved-1f1b, V for zb-v and dualpipe-v), so their bounds differ.",
        "",
        "| case | method | makespan | stage span | bubble | peak mem | LB makespan | LB stage span |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for case, problem in cases().items():
        for name in METHODS:
            shaped = two_chunk(problem, TWO_CHUNK[name]) if name in TWO_CHUNK else problem
            line = row(case, name, shaped)
            if line:
                lines.append(line)
    text = "\n".join(lines) + "\n"
    publish(text, OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())

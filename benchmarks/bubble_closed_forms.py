"""The seeds' bubble table (DualPipe paper, Table 2 context; Megatron-LM's interleaved bound) measured
on our recipes over p, m, v, next to the closed forms.

Bubble fraction = (device 0's stage span - its work) / its work, the Megatron-LM convention, with
the ``stage_span`` objective, uniform stages and comm 0. One model per row: whole-device costs
F = 1, B = 2 (W = 1 of it when split), cut into v chunks of 1/v each for the two-chunk rows.
Closed forms: 1F1B (p - 1)/m; interleaved 1F1B (p - 1)/(v m) (m a multiple of p); ZB-H2 about 0
(the zero-bubble paper: its bubble is the warm-up's, independent of m); looped-bfs (p - 1)/(v m)
too (derivation in ``solver/heuristics/classic/looped_bfs.py``), at the price of v m activations.
DualPipe (placement "dual", two copies of a p-stage model, one stage of each per device, so the same
work per device): the DeepSeek-V3 table's bubble (p/2 - 1)(F&B + B - 3W) over the work, with F&B =
F + B (no overlap), and the exact form our timing of the published order reaches,
(p/2 - 1)(F + B - 2W) (half a pipeline of ZB1P; ``tests/solver/test_dualpipe_closed_forms.py``);
about 0 either way as m grows, at p + 1 microbatches' activations.

Run: ``python benchmarks/bubble_closed_forms.py``; writes ``benchmarks/results/bubble_closed_forms.md``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402

from pipesched.solver import Problem, solve  # noqa: E402

COMMAND = "python benchmarks/bubble_closed_forms.py"
OUT = Path(__file__).parent / "results" / "bubble_closed_forms.md"


def fraction(p: int, m: int, v: int, method: str, split: bool) -> tuple[float, float]:
    """Bubble fraction of device 0 and the largest activation peak (microbatches of the whole device)."""
    costs = {"forward": 1.0 / v, "backward_input": (1.0 if split else 2.0) / v,
             "backward_weight": (1.0 if split else 0.0) / v, "comm": 0.0}
    problem = Problem(devices=p, microbatches=m, stages_per_device=v, split_backward=split,
                      objective="stage_span", costs=costs,
                      memory={"forward": 1.0 / v, "backward_input": 0.0, "backward_weight": -1.0 / v})
    schedule = solve(problem, method)
    work = m * 3.0
    return schedule.objective_value / work - 1.0, max(schedule.peak_memory)


def dual_fraction(p: int, m: int) -> tuple[float, float]:
    """``dualpipe``'s bubble fraction (device 0) and activation peak on the same whole-device costs."""
    problem = Problem(devices=p, microbatches=m, stages_per_device=2, placement="dual", objective="stage_span",
                      costs={"forward": 1.0, "backward_input": 1.0, "backward_weight": 1.0, "comm": 0.0})
    schedule = solve(problem, "dualpipe")
    work = m * 3.0
    mine = [o for o in schedule.ops if o.device == 0]
    span = max(o.end for o in mine) - min(o.start for o in mine)
    return span / work - 1.0, max(schedule.peak_memory)


def main() -> int:
    lines = [
        f"Made by `{COMMAND}`. Bubble fraction = (stage span − work) / work on device 0; uniform stages,",
        "comm 0, whole-device F = 1, B + W = 2; peak = largest per-device activations in microbatches.",
        "",
        "DualPipe: placement 'dual', F = B = W = 1 per model stage (the same work per device); table = the",
        "DeepSeek-V3 table's (p/2−1)(F&B+B−3W)/work with F&B = F + B, ours = (p/2−1)(F+B−2W)/work.",
        "",
        "| p | m | v | 1F1B | (p−1)/m | interleaved | (p−1)/(vm) | looped-bfs | peak BFS | ZB-H2 | peak ZB-H2 "
        "| DualPipe | table | ours | peak DualPipe |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in (2, 4, 8):
        for m in (p, 2 * p, 4 * p):
            one, _ = fraction(p, m, 1, "1f1b", split=False)
            zb, zb_peak = fraction(p, m, 1, "zb-h2", split=True)
            dp, dp_peak = dual_fraction(p, m)
            table = (p / 2 - 1) * ((1 + 2) + 2 - 3 * 1) / (3 * m)
            ours = (p / 2 - 1) * (1 + 2 - 2 * 1) / (3 * m)
            for v in (2, 4):
                inter, _ = fraction(p, m, v, "interleaved-1f1b", split=False)
                bfs, bfs_peak = fraction(p, m, v, "looped-bfs", split=False)
                lines.append(
                    f"| {p} | {m} | {v} | {one:.4f} | {(p - 1) / m:.4f} | {inter:.4f} | {(p - 1) / (v * m):.4f} "
                    f"| {bfs:.4f} | {bfs_peak:g} | {zb:.4f} | {zb_peak:g} | {dp:.4f} | {table:.4f} | {ours:.4f} "
                    f"| {dp_peak:g} |"
                )
    text = "\n".join(lines) + "\n"
    report.publish(text, OUT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

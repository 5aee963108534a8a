"""DualPipe vs DualPipe-V vs ZB-V vs auto, on the dual and V placements of one model, at equal memory
(issue 14).

One model, one global batch of m microbatches, p devices. Dual placement: p model stages held twice
(one per direction), F = 1, b = 1.5, w = 0.5 per stage and microbatch, activations +1 per F (released
by W). V placement: the same model cut into 2p half-stage chunks (F = 0.5, b = 0.75, w = 0.25,
activations 0.5). Every device does the same work per step under both (3 m). comm 0.05 between
devices. Overlap: none, or ``costs.overlap_fb = 0.7`` (a paired F&B takes 0.7 of F + b).

Static memory: parameters, gradients and optimizer state of one model stage count ``P = 2`` activation
units (an assumption, stated here). A dual device holds two model stages (2P), a V device two half
stages (P). "Equal memory" gives every device the same *total* ``T``; the activation cap is ``T`` minus
the device's static memory:

- ``none``: no cap (activations only, static memory not counted);
- ``T = 2P + p + 1``: the dual cap is ``p + 1`` (DualPipe's own peak), the V cap ``p + 1 + P``;
- ``T = P + p + 1``: the V cap is ``p + 1``, the dual cap ``p + 1 - P`` (DualPipe's order no longer fits;
  ``auto`` schedules within it).

Columns: makespan (objective), bubble, activation peak, total peak (activations + static). The last
column says whether ``auto`` on the dual placement matched or beat ``dualpipe`` where both ran.

Run: ``python benchmarks/dualpipe.py [--time-limit S]`` (default 4 s per auto run); writes
``benchmarks/results/dualpipe.md``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402

from pipesched.solver import NotApplicableError, Problem, SolveOptions, solve  # noqa: E402

OUT = Path(__file__).parent / "results" / "dualpipe.md"
STATIC = 2.0  # P: one model stage's parameters + gradients + optimizer state, in activation units
COSTS = {"forward": 1.0, "backward_input": 1.5, "backward_weight": 0.5}
COMM = 0.05
OVERLAP = 0.7


def problem(placement: str, p: int, m: int, cap: float | None, overlap: float | None) -> Problem:
    scale = 1.0 if placement == "dual" else 0.5  # V chunks are half a model stage
    costs = {k: v * scale for k, v in COSTS.items()} | {"comm": COMM, "overlap_fb": overlap}
    return Problem(devices=p, microbatches=m, stages_per_device=2, placement=placement, costs=costs,
                   memory={"forward": scale, "backward_input": 0.0, "backward_weight": -scale, "limit": cap})


def static(placement: str) -> float:
    return 2 * STATIC if placement == "dual" else STATIC


def run(placement: str, method: str, p: int, m: int, total: float | None, overlap: float | None,
        limit_s: float) -> tuple[str, float | None]:
    cap = None if total is None else total - static(placement)
    try:
        s = solve(problem(placement, p, m, cap, overlap), method, SolveOptions(time_limit_s=limit_s))
    except NotApplicableError as e:
        needs = str(e).split(" needs ")[1].split(" activation")[0] if " needs " in str(e) else "?"
        return f"n/a (needs {needs})", None
    if not s.ops:
        return f"{s.status}", None
    peak = max(s.peak_memory)
    return (f"{s.objective_value:.2f} | {s.bubble_ratio:.3f} | {peak:g} | {peak + static(placement):g}",
            s.objective_value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=4.0, help="seconds per auto run")
    args = parser.parse_args(argv)
    command = report.command_line("dualpipe.py", argv)
    lines = [
        f"Made by `{command}`. Model: p stages, F = 1, b = 1.5, w = 0.5 per stage (V: half-stage chunks), comm "
        f"{COMM}; static memory P = {STATIC:g} per model stage (dual devices hold 2P, V devices P); overlap = "
        f"costs.overlap_fb {OVERLAP} or none. Cells: makespan | bubble | activation peak | total peak.",
        "",
        "| p | m | overlap | total T | cap dual / V | dualpipe (dual) | auto (dual) | dualpipe-v (V) | zb-v (V) "
        "| auto (V) | auto ≤ dualpipe |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in (4, 8):
        for m in (2 * p, 4 * p):
            for overlap in (None, OVERLAP):
                for label, total in (("none", None), ("2P+p+1", 2 * STATIC + p + 1), ("P+p+1", STATIC + p + 1)):
                    cells, values = [], {}
                    for placement, method in (("dual", "dualpipe"), ("dual", "auto"), ("v", "dualpipe-v"),
                                              ("v", "zb-v"), ("v", "auto")):
                        text, value = run(placement, method, p, m, total, overlap, args.time_limit)
                        cells.append(text.replace(" | ", " · "))
                        values[(placement, method)] = value
                    mine, auto = values[("dual", "dualpipe")], values[("dual", "auto")]
                    check = "–" if mine is None or auto is None else ("yes" if auto <= mine + 1e-9 else "NO")
                    caps = "– / –" if total is None else f"{total - 2 * STATIC:g} / {total - STATIC:g}"
                    lines.append(f"| {p} | {m} | {overlap or 'none'} | {label} | {caps} | " + " | ".join(cells)
                                 + f" | {check} |")
    report.publish("\n".join(lines) + "\n", OUT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The fidelity benchmark's check of the sum-of-layers assumption: per-block F / B / W of a 1-block
stage against an all-blocks stage (``benchmarks/fidelity.py`` appends this table)."""

from __future__ import annotations

import statistics
import time

import torch

from pipesched.runtime.replay.split_backward import backward_input


def depth_table(layers: list[torch.nn.Module], x: torch.Tensor, rounds: int) -> list[str]:
    """Per-layer F / B / W of a stage of 1 block and of every block, measured alternately (so load
    hits both alike): whether a stage costs the sum of its layers' profiles, as the model assumes."""
    blocks = layers[1:-1]
    depths = sorted({1, len(blocks)})
    times: dict[int, list[tuple[float, float, float]]] = {k: [] for k in depths}
    h = layers[0](x).detach()
    for r in range(rounds + 2):
        for k in depths:
            stage = torch.nn.Sequential(*blocks[:k])
            xi = h.detach().requires_grad_(True)
            t0 = time.perf_counter()
            y = stage(xi)
            t1 = time.perf_counter()
            _, job = backward_input([y], [torch.ones_like(y)], [xi], list(stage.parameters()))
            t2 = time.perf_counter()
            job.run()
            t3 = time.perf_counter()
            if r >= 2:  # warm-up rounds
                times[k].append((1e3 * (t1 - t0) / k, 1e3 * (t2 - t1) / k, 1e3 * (t3 - t2) / k))
    out = ["", "Cost per block when a stage holds k blocks (median of alternated runs, one thread); the model "
           "assumes a stage costs the sum of its layers, i.e. equal rows:", "",
           "| k blocks per stage | F per block (ms) | B per block (ms) | W per block (ms) |", "|---|---|---|---|"]
    for k in depths:
        f, b, w = (statistics.median(t[i] for t in times[k]) for i in range(3))
        out.append(f"| {k} | {f:.3f} | {b:.3f} | {w:.3f} |")
    return out

"""The zero-bubble authors' V auto-schedule (Qi et al., "Pipeline Parallelism with Controllable Memory",
NeurIPS 2024: building blocks repeated, squeezed and reordered), rewritten.

Read from sail-sg/zero-bubble-pipeline-parallelism,
``megatron/core/pipeline_parallel/zerobubble/scheduler/v_auto_schedule.py`` (``schedule``); nothing in
that repository calls it, so its inputs are the function's own: one F, B, W and comm cost, the device
count, the microbatch count and a memory limit counted in chunk activations (F +1, W -1, B 0).

V placement: device ``d`` holds stages ``d`` and ``2p - 1 - d``. On unit-time cells:

1. a building block gives each device one 6-cell pattern of its six passes (F, f, B, b; each W / w
   in the first free cell after its B / b). Device 0's pattern is any placement of f, B, b in cells
   1..5 (F at 0); device ``i + 1``'s moves F and B by ``+k`` cells (mod 6) and f and b by ``-1`` from
   device ``i``'s, with ``k = k0`` for the first ``len0`` devices and ``k1 <= k0`` after (``k`` in 1..5);
2. the patterns repeat, each kind is cut to ``max(m, 2p)`` microbatches from a V-shaped sweep, passes
   are squeezed to their earliest cells, the warm-up and cool-down are re-laid to a fixed shape, blank
   cells are filled by later ready passes that keep the peak, and the padding microbatches dropped;
3. every block whose peak is within the limit (and ``2p``) is built; the one with the least largest
   device span under the scalar costs wins (larger ``len0`` stops a ``(k0, k1)`` once over the limit).

Costs: the generator takes one cost per pass. Following ``zbv.py`` (their runtime's convention for
V schedules), each pass's cost is each device's mean over its two stages, then the upper median over
devices (:meth:`Inputs.v_median_costs`); the comm is the upper median of the boundaries' latencies.
The costs only rank the blocks (the cells do not depend on them), so, as ``zbv.py`` does, the
reference times every distinct order the search builds on our problem and keeps the best;
:func:`v_auto_pick` is the authors' own choice. Memory: the limit in chunk activations is each
device's cap over the larger F delta of its two stages, rounded down (least over devices; ``2p``, their
ceiling, without a cap). That count bounds our level when B and W free memory, and every order is
still checked against the cap by our timing.
"""

from __future__ import annotations

import functools
import math
from collections import Counter

from pipesched.solver import Problem
from pipesched.solver.core.instance import OpId

from . import v_auto_grid as g
from .common import Inputs, Timed, Unbuildable, best_of, order_of

NAME = "v auto-schedule (authors)"
Block = list[list[int]]


def _with_weights(slots: list[int]) -> list[int]:
    """W / w in the first free cell at or after B / b, cyclically."""
    taken = {s for s in slots if s >= 0}
    for back, weight in ((2, 4), (3, 5)):
        for k in range(g.PERIOD):
            cell = (slots[back] + k) % g.PERIOD
            if cell not in taken:
                slots[weight] = cell
                taken.add(cell)
                break
    return slots


def block(first: list[int], k0: int, k1: int, len0: int, p: int) -> Block | None:
    """Device 0's pattern shifted device by device (None when two passes would share a cell)."""
    rows = [first]
    for i in range(p - 1):
        k = k0 if i < len0 else k1
        nxt = [-1] * g.PERIOD
        taken: set[int] = set()
        for kind, shift in enumerate((k, -1, k, -1)):
            cell = (rows[-1][kind] + shift) % g.PERIOD
            if cell in taken:
                return None
            taken.add(cell)
            nxt[kind] = cell
        rows.append(_with_weights(nxt))
    return rows


def first_patterns() -> list[list[int]]:
    """Every device-0 pattern: F at cell 0, f, B, b in distinct cells of 1..5 (f slowest to vary)."""
    return [_with_weights([0, ff, b, bb, -1, -1]) for ff in range(1, 6) for b in range(1, 6)
            for bb in range(1, 6) if len({ff, b, bb}) == 3]


def build(p: int, m: int, blk: Block, limit: int) -> tuple[g.Grid | None, int]:
    """One block's schedule and its peak (None when it fails a check; the peak says why)."""
    padded = max(m, 2 * p)
    grid = g.repeat(blk, padded)
    start_peak = max(g.peaks(grid))
    if (m == padded and start_peak > limit) or start_peak > 2 * p:
        return None, start_peak
    grid = g.compact(grid, padded)
    grid = g.compact(g.warm_up(grid, padded), padded)
    peak = max(g.peaks(grid))
    if peak > start_peak:
        return None, start_peak
    if m < padded:
        grid = g.drop_extra(grid, m)
        if m <= p and 2 * m <= limit:
            grid = g.release_early_w(grid, min(2 * p, peak))
        grid = g.compact(grid, m)
        start_peak = peak = max(g.peaks(grid))
        if peak > limit:
            return None, peak
    grid = g.fill_gaps(g.cool_down(grid, m), m)
    grid = g.relabel_weights(grid, m)
    peak = max(g.peaks(grid))
    if peak > start_peak or not g.consistent(grid, m):
        return None, min(peak, start_peak)
    return grid, peak


@functools.lru_cache(maxsize=4)
def search(p: int, m: int, limit: int) -> list[g.Grid]:
    """Every schedule the authors' search builds, in their visiting order (cached: it depends on these
    three numbers only, and callers only read the grids)."""
    out: list[g.Grid] = []
    cache: dict[str, tuple[g.Grid | None, int]] = {}
    for first in first_patterns():
        for k0 in range(1, 6):
            for k1 in range(1, k0 + 1):
                for len0 in range(1, p):
                    blk = block(list(first), k0, k1, len0, p)
                    if blk is None:
                        continue
                    key = repr(blk)
                    if key not in cache:
                        try:
                            cache[key] = build(p, m, blk, min(2 * p, limit))
                        except (Unbuildable, IndexError):
                            cache[key] = (None, 0)
                    grid, peak = cache[key]
                    if peak > 2 * p or peak > limit:
                        break
                    if grid is not None:
                        out.append(grid)
    return out


def span(grid: g.Grid, f: float, b: float, w: float, c: float) -> float:
    """The authors' score: the largest device span (first F's start to last W's end), each pass at once
    after its device's previous pass and its neighbour's input plus ``c``."""
    p = len(grid)
    seqs = [[x for x in row if x != " "] for row in grid]
    cost = {"F": f, "f": f, "B": b, "b": b, "W": w, "w": w}
    end: dict[tuple[int, str, int], float] = {}
    pos, clock = [0] * p, [0.0] * p
    counts = [Counter[str]() for _ in range(p)]
    first = [0.0] * p
    moved = True
    while moved:
        moved = False
        for i in range(p):
            while pos[i] < len(seqs[i]):
                x = seqs[i][pos[i]]
                n = counts[i][x]
                t = clock[i]
                src = i - 1 if x in "FB" else i + 1 if x in "fb" else -1
                if 0 <= src < p:
                    if (src, x, n) not in end:
                        break
                    t = max(t, end[src, x, n] + c)
                if pos[i] == 0:
                    first[i] = t
                clock[i] = end[i, x, n] = t + cost[x]
                counts[i][x] += 1
                pos[i] += 1
                moved = True
    if any(pos[i] < len(seqs[i]) for i in range(p)):
        return math.inf
    return max(clock[i] - first[i] for i in range(p))


def ops(grid: g.Grid) -> list[list[tuple[str, int, int]]]:
    """The cells as ``(kind, stage, microbatch)`` per device (F, b, w on stage ``d``; f, B, W on
    ``2p - 1 - d``)."""
    p = len(grid)
    out = []
    for d, row in enumerate(grid):
        seen = Counter[str]()
        seq = []
        for x in row:
            if x != " ":
                seq.append((x.upper(), d if x in "Fbw" else 2 * p - 1 - d, seen[x]))
                seen[x] += 1
        out.append(seq)
    return out


def applies(problem: Problem) -> bool:
    return problem.placement == "v" and problem.split_backward and problem.devices >= 2


def chunk_limit(x: Inputs) -> int:
    """The cap in chunk activations: per device, its cap over its larger stage F delta, rounded down."""
    p, s = x.devices, 2 * x.devices
    out = 2 * p
    for d in range(p):
        unit = max(x.mem["F"][d], x.mem["F"][s - 1 - d])
        if math.isfinite(x.limit[d]) and unit > 0:
            out = min(out, math.floor(x.limit[d] / unit + 1e-9))
    return out


def _scalar_costs(x: Inputs) -> tuple[float, float, float, float]:
    v = x.v_median_costs()
    comms = sorted(x.comms)
    return v.cost["F"][0], v.cost["B"][0], v.cost["W"][0], comms[len(comms) // 2]


def v_auto_grids(problem: Problem) -> list[g.Grid]:
    if not applies(problem):
        return []
    x = Inputs.of(problem)
    return search(x.devices, x.microbatches, chunk_limit(x))


def v_auto_pick(problem: Problem) -> list[list[OpId]] | None:
    """The authors' own choice: the least span under the scalar costs (ties: the first built)."""
    grids = v_auto_grids(problem)
    if not grids:
        return None
    costs = _scalar_costs(Inputs.of(problem))
    return order_of(ops(min(grids, key=lambda gr: span(gr, *costs))))


def v_auto_orders(problem: Problem) -> list[list[list[OpId]]]:
    """Every distinct order the search builds."""
    seen: dict[str, list[list[OpId]]] = {}
    for grid in v_auto_grids(problem):
        order = order_of(ops(grid))
        seen.setdefault(repr(order), order)
    return list(seen.values())


def v_auto(problem: Problem) -> Timed | None:
    """The best built order under our timing, within the cap (None when none builds)."""
    return best_of(problem, NAME, v_auto_orders(problem))

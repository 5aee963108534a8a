"""Memory lanes over all splits and recompute choices: the bound term that sees a memory cap.

The stage windows of :mod:`.bound` drop memory, so on a memory-tight cluster they measure the work,
not what the cap costs. This term keeps the cap and relaxes everything else.

**Lanes** (as :func:`pipesched.solver.bounds.analytic.memory_lanes` for one Problem): when no layer
can hold negative memory (``dF >= 0`` and ``dF + dB >= 0``, plain and recomputed), microbatch ``i``
holds at least its stage's ``h1 = Σ dF`` from ``F(s, i)``'s start until ``B(s, i)``'s end, an interval
at least the round trip ``R = Σ_{k>=i} (F_k + B_k) + 2 · (crossings after s) · c`` long, and (split
backward) at least ``h2 = Σ min(dF, dF + dB)`` until ``W(s, i)`` ends (``R + W`` long). On device
``d`` with memory ``M_d`` the stage's activations have at most ``L = M_d − static(stage)`` (other
stages on ``d`` hold ``>= 0``), so at most ``K = floor(L / h)`` intervals overlap; they fit in ``K``
lanes (interval graphs are perfect) and one lane holds ``ceil(m / K)`` disjoint intervals, each
starting after the stage's head ``r`` and followed by its tail:
``r + ceil(m / K1) · R + max(W, x_s · c + Σ_{k<i} B_k + W_0)`` and ``r + ceil(m / K2) · (R + W)``.

**Recompute** (any subset of the stage's layers, per layer) lowers ``h`` by a layer's saving
(plain minus recomputed delta) at the cost of its ``F`` added to ``B``: by ``x`` in total, which the
stage's all-ops window ``r + m · (F + B + W)`` pays ``m`` times and ``R`` once. Letting layers be
recomputed fractionally (a relaxation: the best saving for a cost ``x`` is a fractional knapsack,
greedy by saving per cost) the stage's value is ``min_x max(window(x), lanes(x))``; between two
values of ``K`` both grow with ``x``, so the minimum is at ``x = 0`` or at the least ``x`` reaching a
``K`` (one per distinct ``ceil(m / K)``). Each ``h`` gives its own valid minimum; the term is the
larger.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..core.tolerance import cap_with_slack
from .model import Cluster, ExpandedLayer
from .sums import LayerTable

Item = tuple[float, float]  # (memory saved, forward time added) by recomputing one layer


def _holds(x: ExpandedLayer, recompute: bool) -> tuple[float, float]:
    """``(h1, h2)`` of one layer: what it holds until its B ends, and until its W ends."""
    f, b, _ = x.recompute if recompute and x.recompute is not None else (
        x.mem_forward, x.mem_backward_input, x.mem_backward_weight)
    return f, min(f, f + b)


def applies(layers: list[ExpandedLayer]) -> bool:
    """Lanes need every microbatch to hold >= 0 at all times, whatever is recomputed."""
    return all(min(h) >= 0 for x in layers for rc in (False, True) for h in [_holds(x, rc)])


def least_cost(items: list[Item], need: float) -> float:
    """The least forward time recomputed (fractionally) that saves at least ``need``; inf if none.
    ``items`` sorted by saving per cost, best first."""
    if need <= 0:
        return 0.0
    x = 0.0
    for save, cost in items:
        if save >= need:
            return x + cost * need / save
        need -= save
        x += cost
    return math.inf


def _sorted_items(layers: list[ExpandedLayer], i: int, j: int, which: int) -> list[Item]:
    out = []
    for x in layers[i:j]:
        if x.recompute is None:
            continue
        save = _holds(x, False)[which] - _holds(x, True)[which]
        if save > 0:
            out.append((save, x.forward))
    return sorted(out, key=lambda it: -math.inf if it[1] == 0 else -it[0] / it[1])


def lane_choices(layers: list[ExpandedLayer], i: int, j: int, which: int, limit: float,
                 m: int) -> list[tuple[float, int]]:
    """``(x, ceil(m / K))`` for ``x = 0`` and the least recompute ``x`` reaching each lane count ``K``
    (one per distinct ``ceil(m / K)``) for hold ``which`` (0: until B, 1: until W) of stage ``[i, j)``
    under activation memory ``limit``; empty when no recompute fits one microbatch (the stage cannot run)."""
    h0 = math.fsum(_holds(x, False)[which] for x in layers[i:j])
    if h0 <= 0:
        return [(0.0, 1)]
    if limit < 0:
        return []
    items = _sorted_items(layers, i, j, which)
    out: list[tuple[float, int]] = []
    room = cap_with_slack(limit)  # what the validator admits: the lanes count may only err upwards
    k0 = math.floor(room / h0 * (1 + 1e-9))
    q = math.ceil(m / k0) if k0 >= 1 else m + 1
    if k0 >= 1:
        out.append((0.0, q))
    for q2 in range(q - 1, 0, -1):
        k = math.ceil(m / q2)
        if math.ceil(m / k) != q2:
            continue  # the same lane count as a smaller q: reached with less recompute
        x = least_cost(items, h0 - room / k * (1 + 1e-9))
        if x == math.inf:
            break
        out.append((x, q2))
    if k0 < 1 and not out:
        return []
    return out


def lane_window(layers: list[ExpandedLayer], cluster: Cluster, m: int, release: list[float],
                crossings: list[int], c: float, fused: bool,
                device_of: list[int]) -> Callable[[int, int, int], float] | None:
    """``value(s, i, j)``: the least over recompute choices of the stage's ``max(all-ops window,
    lanes)`` (module docstring); None when memory is unbounded or some layer can hold negative memory."""
    if cluster.memory_per_device is None or not applies(layers):
        return None
    t, n = LayerTable(layers), len(layers)
    w0 = 0.0 if fused else t.backward_weight(0, 1)
    total_x = crossings[-1]
    cache: dict[tuple[int, int, int, float], list[tuple[float, int]]] = {}

    def b(i: int, j: int) -> float:
        return t.backward_input(i, j) + (t.backward_weight(i, j) if fused else 0.0)

    def choices(i: int, j: int, which: int, memory: float) -> list[tuple[float, int]]:
        key = (i, j, which, memory)
        if key not in cache:
            cache[key] = lane_choices(layers, i, j, which, memory - t.static(i, j), m)
        return cache[key]

    hold = [[0.0], [0.0]]  # prefix sums of h1 and h2 (plain): the quick test of whether lanes can bind
    for x in layers:
        for which in (0, 1):
            hold[which].append(hold[which][-1] + _holds(x, False)[which])

    def value(s: int, i: int, j: int) -> float:
        memory = cluster.memory(device_of[s])
        if m * max(hold[0][j] - hold[0][i], hold[1][j] - hold[1][i]) <= memory - t.static(i, j):
            return 0.0  # all m microbatches fit at once: one lane, no more than the chain
        r = t.forward(0, i) + release[s]
        w = 0.0 if fused else t.backward_weight(i, j)
        work = r + m * (t.forward(i, j) + b(i, j) + w)
        trip = t.forward(i, n) + b(i, n) + 2 * (total_x - crossings[s]) * c
        tail = max(w, crossings[s] * c + b(0, i) + w0)
        best = 0.0
        for which, length, after in ((0, trip, tail), (1, trip + w, 0.0)):
            if which == 1 and fused:
                continue
            options = choices(i, j, which, memory)
            if not options:
                return math.inf  # one microbatch does not fit this stage, recomputed or not
            best = max(best, min(max(work + m * x, r + q * (length + x) + after) for x, q in options))
        return best

    return value

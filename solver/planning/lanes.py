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

**Ramp and drain** (the windows with the gaps the cap forces). ``B(s, i)`` starts at least ``ρ = R −
B`` after ``F(s, i)`` starts. Before the stage's first B starts (at ``t_B``) it can run only Fs, each
still holding ``h1``, so at most ``K1`` of them: from its first op (``>= r``) to ``t_B`` it is idle at
least ``ρ − K1 · F``. From its last F's start ``t_F`` the rest of its ops are that F and the B and W
of the microbatches still holding ``h2`` at ``t_F`` (at most ``K2``), but that microbatch's B and W end
``>= ρ + B + W`` later: idle ``>= ρ − F − (K2 − 1) (B + W)``. With ``m > K1``, ``t_F > t_B`` and the two
gaps add to the all-ops window: ``r + m · (F + B + W) + gaps``; for the Fs-and-Bs window (the
backward below the stage and ``W_0`` after its last B) the drain counts Bs with ``K1``:
``r + m · (F + B) + gaps + x_s · c + Σ_{k<i} B_k + W_0``. With ``m <= K1`` the gaps may overlap: their
larger. A stage of the 8B, s = 8k, p = 8 tight case (``benchmarks/plan.py``) that may hold 5
microbatches 603 ms apart runs 5 Fs of 59 ms and waits 235 ms for its first B: its window rises from
5800 to 6035, what CP-SAT proves for that split.

**Held Ws**: when the stage's last B ends, each microbatch whose W is still to run holds at least
``hB = Σ min(dF + dB)`` (plain or recomputed: what a layer keeps between its B and its W), so at most
``KW = floor(L / hB)`` Ws are left; the other ``m − KW`` ran before, and the backward below the stage
and ``W_0`` follow that B: ``r + m · (F + B) + (m − KW) · W + gaps + x_s · c + Σ_{k<i} B_k + W_0``, the
drain here ending at that B and counting Ws as work (``ρ − F − (K2 − 1) · B − K2 · W``). Ws deferred
past the last B are what lets a late stage end with no tail; under a cap few can be.

**Recompute** (any subset of the stage's layers, per layer) lowers ``h`` by a layer's saving
(plain minus recomputed delta) at the cost of its ``F`` added to ``B``: by ``x`` in total, which the
windows pay ``m`` times and ``R`` once (``ρ`` not at all; the drain's Bs grow by ``x``). Letting
layers be recomputed fractionally (a relaxation: the best saving for a cost ``x`` is a fractional
knapsack, greedy by saving per cost, for ``h1`` and ``h2`` each; a real choice of cost ``x`` fits no
more than either) the stage's value is ``min_x max(windows(x), lanes(x))``. Every term falls as ``K1``
or ``K2`` grows and, with the counts fixed, grows with ``x`` (``m · x`` against at most ``(K − 1) · x``
off a drain), so the minimum is at ``x = 0`` or at the least ``x`` reaching some ``K1`` or ``K2``: every
count up to where the gaps vanish, and above it each new ``ceil(m / K)``.
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


def slot_choices(layers: list[ExpandedLayer], i: int, j: int, which: int, limit: float, m: int,
                 upto: int) -> list[tuple[float, int]]:
    """``(x, K)``: the least recompute ``x`` (fractional) at which ``K`` microbatches' holds ``which``
    (0: until B, 1: until W) fit stage ``[i, j)`` under activation memory ``limit``, for every ``K <=
    upto`` from the plain count up and above it each ``K`` that starts a new ``ceil(m / K)``; ``K <=
    m``. Empty when no recompute fits one microbatch. The plain count errs upwards (the validator's
    slack: what it admits)."""
    h0 = math.fsum(_holds(x, False)[which] for x in layers[i:j])
    if h0 <= 0:
        return [(0.0, m)]
    if limit < 0:
        return []
    items = _sorted_items(layers, i, j, which)
    room = cap_with_slack(limit)
    k0 = min(m, math.floor(room / h0 * (1 + 1e-9)))
    out: list[tuple[float, int]] = [(0.0, k0)] if k0 >= 1 else []
    for k in range(max(k0, 0) + 1, m + 1):
        if k > upto and math.ceil(m / k) == math.ceil(m / (k - 1)):
            continue  # only the lanes could change, and they do not
        x = least_cost(items, h0 - room / k * (1 + 1e-9))
        if x == math.inf:
            break
        out.append((x, k))
    return out


def lane_window(layers: list[ExpandedLayer], cluster: Cluster, m: int, release: list[float],
                crossings: list[int], c: float, fused: bool,
                device_of: list[int]) -> Callable[[int, int, int], float] | None:
    """``value(s, i, j)``: the least over recompute choices of the stage's windows with their ramp and
    drain and its lanes (module docstring); None when memory is unbounded or some layer can hold
    negative memory."""
    if cluster.memory_per_device is None or not applies(layers):
        return None
    t, n = LayerTable(layers), len(layers)
    w0 = 0.0 if fused else t.backward_weight(0, 1)
    total_x = crossings[-1]
    cache: dict[tuple[int, int, int, float], list[tuple[float, int]]] = {}

    def b(i: int, j: int) -> float:
        return t.backward_input(i, j) + (t.backward_weight(i, j) if fused else 0.0)

    hold = [[0.0], [0.0]]  # prefix sums of h1 and h2 (plain): the quick test of whether lanes can bind
    after_b = [0.0]  # prefix sums of the least a layer holds between its B and its W, recomputed or not
    for x in layers:
        for which in (0, 1):
            hold[which].append(hold[which][-1] + _holds(x, False)[which])
        levels = [x.mem_forward + x.mem_backward_input] + ([x.recompute[0] + x.recompute[1]] if x.recompute else [])
        after_b.append(after_b[-1] + min(levels))

    def slots(i: int, j: int, which: int, memory: float, upto: int) -> list[tuple[float, int]]:
        key = (i, j, which, memory, upto)
        if key not in cache:
            cache[key] = slot_choices(layers, i, j, which, memory - t.static(i, j), m, upto)
        return cache[key]

    def value(s: int, i: int, j: int) -> float:
        memory = cluster.memory(device_of[s])
        r = t.forward(0, i) + release[s]
        f, bb, w = t.forward(i, j), b(i, j), 0.0 if fused else t.backward_weight(i, j)
        up = crossings[s] * c + b(0, i) + w0  # after a B of the stage: the backward below it, W_0
        trip = t.forward(i, n) + b(i, n) + 2 * (total_x - crossings[s]) * c
        ramp = trip - bb  # from an F of the stage starting to its B starting, at least
        held = after_b[j] - after_b[i]
        room = cap_with_slack(memory - t.static(i, j))
        # Ws still to run when the stage's last B ends: each of their microbatches holds ``held``
        kw = m if fused or held <= 0 else min(m, max(0, math.floor(room / held * (1 + 1e-9))))

        def at(x: float, k1: int, k2: int) -> float:
            """The stage's bound for recompute ``x`` with at most ``k1`` holds until B, ``k2`` until W."""
            start = max(0.0, ramp - min(k1, m) * f)  # before its first B the stage runs <= k1 Fs
            drain_all = max(0.0, ramp - f - (k2 - 1) * (bb + x + w))  # after its last F: <= k2 in flight
            drain_fb = max(0.0, ramp - f - (k1 - 1) * (bb + x))
            drain_w = max(0.0, ramp - f - (k2 - 1) * (bb + x) - k2 * w)  # ... until its last B ends
            if k1 >= m:  # the last F may come before the first B: the two gaps may overlap
                drain_all, drain_fb, drain_w = max(start, drain_all), max(start, drain_fb), max(start, drain_w)
                start = 0.0
            return max(r + m * (f + bb + x + w) + start + drain_all,
                       r + m * (f + bb + x) + up + start + drain_fb,
                       r + m * (f + bb + x) + (m - kw) * w + up + start + drain_w,
                       r + math.ceil(m / k1) * (trip + x) + max(w, up),
                       r + math.ceil(m / k2) * (trip + x + w))

        if m * max(hold[0][j] - hold[0][i], hold[1][j] - hold[1][i]) <= memory - t.static(i, j):
            return at(0.0, m, m)  # all m microbatches fit at once
        # above these counts no gap is left, only the lanes change (each new ceil(m / K) is kept)
        upto = m if f <= 0 or bb <= 0 else min(m, max(math.ceil(ramp / f), math.ceil((ramp - f) / bb) + 1) + 1)
        holds = [slots(i, j, 0, memory, upto)]
        if not fused:
            holds.append(slots(i, j, 1, memory, m if bb + w <= 0 else min(m, math.ceil(ramp / (bb + w)) + 2)))
        if not all(holds):
            return math.inf  # one microbatch does not fit this stage, recomputed or not

        def count(options: list[tuple[float, int]], x: float) -> int:
            return max(k for y, k in options if y <= x)

        best = math.inf
        for x in sorted({y for options in holds for y, _ in options}):
            if all(options[0][0] <= x for options in holds):
                k1 = count(holds[0], x)
                best = min(best, at(x, k1, count(holds[1], x) if not fused else k1))
        return best

    return value

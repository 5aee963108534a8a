"""The device windows of the plan bound with the idle a memory cap forces at the turn of the V.

Under the V placement (``v = 2``) device ``d`` holds stage ``s = d`` (layers ``[i, i')``) and stage
``t = 2p − 1 − d`` (``[j', j)``); a microbatch goes down the devices through ``s``, turns, comes back up
through ``t``, and its backward meets ``t`` first. The paired device windows of :mod:`.bound` charge
the device ``head_d + m · work(d)``; for one Problem :mod:`pipesched.solver.bounds.v_turn` and
:mod:`pipesched.solver.bounds.shared_cap` show the idle inside that window, before the device's first
``B`` or ``W``, where only forwards run and nothing frees memory (``t0`` its first start, ``C`` its
activation room ``memory − static`` of its layers, ``dF`` a stage's summed forward delta):

- **first F of t**: before it only ``F(s, ·)`` run, at most ``k = floor((C − max(dF_t, 0)) / dF_s)`` of
  them (``m`` when ``dF_s <= 0``), and it starts ``>= t0 + gap_f`` (the forwards of ``[i, j')`` and the
  crossings between, each at least ``c``): idle ``>= gap_f − min(k, m) · F_s``;
- **first B of t** (with ``dF_s > 0``, ``dF_t >= 0``): it starts ``>= t0 + G``, ``G`` the forwards of
  ``[i, n)``, the backward of ``[j, n)`` and the crossings; the forwards started by then hold at most
  ``C`` together, an ``F(t)`` is worth at most ``min(F_t, G − gap_f)`` of the window: idle ``>= G −``
  the most ``n_s F_s + n_t ·`` that worth with ``n_s dF_s + n_t dF_t <= C`` (whole ops, at most ``m``
  of each).

Both windows lie inside ``[t0, first B or W)``, so the larger idle counts. Backward times and lags
are the plain layers' and the least crossing (lower, so the windows are still forward-only).

**Recompute** lowers ``dF`` but each recomputed layer re-runs its forward on every B: a choice that
recomputes any layer of the device saving forward delta costs at least ``m ·`` the least forward of
such a layer (recompute is chosen per whole layer), and one that recomputes none leaves every ``dF``
at or above the plain sum. So over every recompute choice the device's value is at least

    head_d + m · work(d) + min(idle, m · least recomputed forward on d).

The transient of a recomputed B does not enter: no B runs in these windows.

The least over splits of ``max_d value_d`` is a min-max DP outside in, as the paired bound's (state:
the layers ``[i, j)`` the inner devices share), but the idle ties all four of the device's boundaries,
so each device visits every ``(i, i', j', j)``: ``O(p n⁴)`` cells, numpy over ``(j, i', j')`` for each
``i``. The innermost device's two stages ``[i, k)``, ``[k, j)`` are adjacent: no turn (``gap_f = F_s``),
but its first B still waits ``G``: its idle is the least over ``k``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..budget.planning import V_TURN_MAX_CELLS
from ..core.tolerance import REL_TOL, cap_with_slack
from .induce import crossings_before
from .model import Cluster, ExpandedLayer


def _least_recomputed(layers: list[ExpandedLayer]) -> np.ndarray:
    """``least[i, j]``: the least forward time of a layer of ``[i, j)`` whose recompute lowers its
    forward delta (inf when none does)."""
    n = len(layers)
    least = np.full((n + 1, n + 1), np.inf)
    for i in range(n):
        for j in range(i + 1, n + 1):
            x = layers[j - 1]
            saves = x.recompute is not None and x.recompute[0] < x.mem_forward
            least[i, j] = min(least[i, j - 1], x.forward if saves else np.inf)
    return least


def _first_f_idle(f_s: np.ndarray, gap_f: np.ndarray, cap: np.ndarray, h_s: np.ndarray, h_t: np.ndarray,
                  m: int) -> np.ndarray:
    """Least idle before the device's first ``F(t)``, elementwise (module docstring)."""
    t0 = np.maximum(h_t, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (cap - t0) / np.where(h_s > 0, h_s, 1.0)
    k = np.maximum(np.where(h_s > 0, np.floor(np.minimum(ratio * (1 + REL_TOL), m)), m), 0.0)
    return np.maximum(0.0, gap_f - k * f_s)


def _first_b_idle(f_s: np.ndarray, f_t: np.ndarray, gap_f: np.ndarray, window: np.ndarray, cap: np.ndarray,
                  h_s: np.ndarray, h_t: np.ndarray, m: int) -> np.ndarray:
    """Least idle before the device's first ``B(t)``, elementwise (module docstring): the forwards that
    start in the window are whole ops, so the knapsack is over counts ``n_t`` of ``F(t)`` (each worth
    at most ``min(F_t, G − gap_f)``) with as many ``F(s)`` as the rest of ``C`` holds; 0 where a stage's
    forward frees memory (the argument needs every forward to hold)."""
    worth_t = np.clip(window - gap_f, 0.0, f_t)
    room = np.maximum(cap, 0.0)
    safe_s = np.where(h_s > 0, h_s, 1.0)
    busy = np.zeros(np.broadcast(f_s, f_t, gap_f, window, cap, h_s, h_t).shape)
    for n_t in range(m + 1):
        left = room - n_t * np.maximum(h_t, 0.0)
        n_s = np.minimum(m, np.floor(np.maximum(left, 0.0) / safe_s * (1 + REL_TOL)))
        busy = np.where(left >= 0, np.maximum(busy, n_s * f_s + n_t * worth_t), busy)
    return np.where((h_s > 0) & (h_t >= 0), np.maximum(0.0, window - busy), 0.0)


def v_turn_devices(layers: list[ExpandedLayer], cluster: Cluster, m: int,
                   alpha: list[Callable[[int], float]], crossings: list[int], c: float) -> float | None:
    """min over splits and recompute choices of ``max_d value_d`` (module docstring), ``alpha_d(i)``
    device ``d``'s head when its first stage starts at layer ``i`` (0 for a stage-span bound);
    None when not a V of two stages per device under a memory cap, or when the DP would visit more
    than :data:`V_TURN_MAX_CELLS` cells."""
    found = _least_split(layers, cluster, m, alpha, crossings, c)
    return None if found is None else found[0]


def v_turn_split(layers: list[ExpandedLayer], cluster: Cluster, m: int) -> list[int] | None:
    """The bounds of a split attaining the makespan V-turn term (plain costs, no recompute): a split the
    bound says nothing can beat by much, worth scheduling; None where the term is not computed."""
    x = crossings_before(cluster)
    c = min(cluster.link.time(y.output) for y in layers[:-1]) if len(layers) > 1 else 0.0
    f = np.concatenate([[0.0], np.cumsum([y.forward for y in layers])])
    tail = np.concatenate([[0.0], np.cumsum([y.backward_input + y.backward_weight for y in layers])])
    fused = not cluster.split_backward
    alpha = [lambda i, d=d: float(f[i]) + x[d] * c + (float(tail[i]) if fused else 0.0)
             for d in range(cluster.devices)]
    found = _least_split(layers, cluster, m, alpha, x, c)
    if found is None:
        return None
    # many splits tie at the least value (blocks move between a device's two stages): of those the one
    # whose heaviest stage is least, the one a schedule can pipeline best
    tied = _least_split(layers, cluster, m, alpha, x, c, within=found[0] * (1 + 1e-9) + 1e-9)
    return (tied or found)[1]


def _least_split(layers: list[ExpandedLayer], cluster: Cluster, m: int, alpha: list[Callable[[int], float]],
                 crossings: list[int], c: float, within: float | None = None) -> tuple[float, list[int]] | None:
    """The min-max DP of the module docstring: its value and the bounds of a split attaining it; with
    ``within``, over the splits whose every device value is at most that, the least heaviest stage
    work instead."""
    p, n = cluster.devices, len(layers)
    if (cluster.placement != "v" or cluster.stages_per_device != 2 or p < 2 or n < 2 * p
            or cluster.memory_per_device is None or p * (n + 1) ** 4 // 4 > V_TURN_MAX_CELLS):
        return None

    def prefix(values: list[float]) -> np.ndarray:
        return np.concatenate([[0.0], np.cumsum(values)])

    fused = not cluster.split_backward
    F = prefix([x.forward for x in layers])
    B = prefix([x.backward_input + (x.backward_weight if fused else 0.0) for x in layers])
    P = prefix([x.forward + x.backward_input + x.backward_weight for x in layers])
    ST = prefix([x.static for x in layers])
    DF = prefix([x.mem_forward for x in layers])
    least = _least_recomputed(layers)
    idx = np.arange(n + 1)
    last = crossings[2 * p - 1]
    best = np.full((n + 1, n + 1), np.inf)
    best[0, n] = 0.0  # no device placed yet
    back = []  # per device: the state (i, j) before it that reaches each (i', j') at least
    for d in range(p - 1):
        inner = 2 * (p - 1 - d)  # layers the inner devices need at least
        s, t = d, 2 * p - 1 - d
        head = np.array([alpha[d](i) for i in range(n + 1)])
        nxt = np.full((n + 1, n + 1), np.inf)
        from_i, from_j = np.zeros((n + 1, n + 1), dtype=int), np.zeros((n + 1, n + 1), dtype=int)
        for i in range(n + 1):
            rows = np.isfinite(best[i])
            if not rows.any():
                continue
            js = idx[rows]  # j: axis 0, i': axis 1, j': axis 2
            j, i2, j2 = js[:, None, None], idx[None, :, None], idx[None, None, :]
            ok = (i2 > i) & (j2 - i2 >= inner) & (j2 < j)
            if not ok.any():
                continue
            f_s, f_t = F[i2] - F[i], F[j] - F[j2]
            h_s, h_t = DF[i2] - DF[i], DF[j] - DF[j2]
            gap_f = F[j2] - F[i] + (crossings[t] - crossings[s]) * c
            window = F[n] - F[i] + B[n] - B[j] + (2 * last - crossings[s] - crossings[t]) * c
            cap = cap_with_slack(cluster.memory(d) - (ST[i2] - ST[i]) - (ST[j] - ST[j2]))
            idle = np.maximum(_first_f_idle(f_s, gap_f, cap, h_s, h_t, m),
                              _first_b_idle(f_s, f_t, gap_f, window, cap, h_s, h_t, m))
            idle = np.minimum(idle, m * np.minimum(least[i, i2], least[j2, j]))
            value = head[i] + m * (P[i2] - P[i] + P[j] - P[j2]) + idle
            if within is not None:
                value = np.where(value <= within, np.maximum(P[i2] - P[i], P[j] - P[j2]), np.inf)
            cand = np.where(ok, np.maximum(best[i, js][:, None, None], value), np.inf)
            low, arg = cand.min(axis=0), js[cand.argmin(axis=0)]
            better = low < nxt
            nxt, from_i, from_j = np.where(better, low, nxt), np.where(better, i, from_i), np.where(better, arg, from_j)
        best = nxt
        back.append((from_i, from_j))
    # the innermost device: stages [i, k) and [k, j), adjacent (no turn), but its first B still waits
    # for the forwards of [i, n) and the backward of [j, n)
    i, k, j = idx[:, None, None], idx[None, :, None], idx[None, None, :]
    f_s, f_t, h_s, h_t = F[k] - F[i], F[j] - F[k], DF[k] - DF[i], DF[j] - DF[k]
    window = F[n] - F[i] + B[n] - B[j] + 2 * (last - crossings[p - 1]) * c
    cap = cap_with_slack(cluster.memory(p - 1) - (ST[j] - ST[i]))
    idle = np.minimum(_first_b_idle(f_s, f_t, f_s, window, cap, h_s, h_t, m), m * least[i, j])
    head = np.array([alpha[p - 1](i) for i in range(n + 1)])
    value = np.where((i < k) & (k < j), head[i] + m * (P[j] - P[i]) + idle, np.inf)
    if within is not None:
        value = np.where(value <= within, np.maximum(P[k] - P[i], P[j] - P[k]), np.inf)
    split_at, value = value.argmin(axis=1), value.min(axis=1)
    final = np.maximum(best, value)
    a, b = np.unravel_index(int(final.argmin()), final.shape)
    value = float(final[a, b])
    if not math.isfinite(value):
        return None
    bounds = [0] * (2 * p + 1)
    bounds[p - 1], bounds[p], bounds[p + 1], bounds[2 * p] = int(a), int(split_at[a, b]), int(b), n
    for d in range(p - 2, -1, -1):
        a, b = int(back[d][0][a, b]), int(back[d][1][a, b])
        bounds[d], bounds[2 * p - d] = a, b
    return value, bounds

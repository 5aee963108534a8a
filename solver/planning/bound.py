"""A lower bound on the step time valid over *every* split and recompute choice.

Recomputation only adds work and memory caps only delay ops, so each term below drops both: it uses
every layer's plain F, B, W. Lags are at least ``c = min_k link.time(output_k)`` per crossing boundary
(the induced Problem's comm is the largest lag, so its optimum is at least the true one's, and this
bound is below both). ``m`` microbatches, ``S`` stages on ``p`` devices; stage ``s`` starts at layer
``b_s`` (``b_s >= s``: stages are non-empty) and ``x_s`` crossing boundaries lie before it.

makespan objective, the largest of:

- **chain**: one microbatch goes forward through every layer and back, then W of stage 0:
  ``Σ_k (F_k + B_k) + W_0 + 2 · (crossings) · c``.
- **stage windows** (min over splits, by a min-max DP over ``b``): the ops of stage ``s`` = layers
  ``[i, j)`` all run on one device, so for any set of them the device is busy for their work between
  the earliest any of them can start (head) and the least time the chain still needs after any of
  them ends (tail) — Jackson's one-machine bound. With ``r = Σ_{k<i} F_k + x_s · c`` and ``F, B, W``
  summed over ``[i, j)``:
  all ops: ``r + m (F + B + W)`` (for uniform layers one per stage, the familiar ``(p − 1) F + m (F +
  B + W)``); the Fs and Bs: ``r + m (F + B) + Σ_{k<i} B_k + W_0`` (after a B, the backward to layer 0
  and its W); the Bs and Ws: ``Σ_k F_k + Σ_{k≥j} B_k + m (B + W)``; the Fs: ``r + m F + Σ_{k≥j} F_k +
  Σ_k B_k + W_0``. With a fused backward, ``B`` stands for ``B + W`` and ``W = 0``.
- **stage windows with memory lanes** (when memory is capped and no layer holds negative memory): each
  stage's value in the DP above is also at least its memory-lanes window and its windows with the
  ramp and drain gaps the cap forces (:mod:`.lanes`), least over any per-layer recompute of the stage
  (fractional, a relaxation).
- **device windows** (v = 2): a device holds two stages, so it is busy ``m · work(d)`` after its first
  stage's head ``Σ_{k < b_d} F_k + x_d · c`` (and, fused, before the backward of the layers before it):
  ``min over splits of max_d (head_d + m · work(d) [+ tail_d])``, found by bisection on a
  feasibility DP over the pair of open boundaries (:func:`_paired_feasible`), reported from below.
- **average**: device d's ops start after ``Σ_{k < b_d} F_k + x_d · c`` (its first stage is ``d`` under
  loop and V placement) and all devices share ``m · Σ work``:
  ``(m · Σ_k work_k + Σ_{d < p} (Σ_{k < d} F_k + x_d · c)) / p``.

stage_span objective (each device's window from its first op): ``m · max(min-max stage work, Σ work / p)``,
and for v = 2 the least busiest device's ``m · work(d)`` over splits.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from pipesched.solver import Instance, Problem

from .induce import crossings_before, stage_devices
from .lanes import lane_window
from .model import Cluster, ExpandedLayer
from .sums import LayerTable
from .v_turn_window import v_turn_devices


@dataclass(frozen=True)
class PlanBound:
    value: float
    derivation: str


def _stage_windows(table: LayerTable, num_stages: int,
                   value: Callable[[int, int, int], float]) -> tuple[float, list[int]]:
    """min over splits of ``max_s value(s, b_s, b_{s+1})``, by DP over stage ends (stages non-empty),
    with the bounds of a split that attains it."""
    n = table.n
    best = [math.inf] * (n + 1)
    best[0] = 0.0
    back: list[list[int]] = []
    for s in range(num_stages):
        nxt, arg = [math.inf] * (n + 1), [0] * (n + 1)
        for j in range(s + 1, n - (num_stages - s - 1) + 1):
            for i in range(s, j):
                if best[i] < math.inf and (v := max(best[i], value(s, i, j))) < nxt[j]:
                    nxt[j], arg[j] = v, i
        best = nxt
        back.append(arg)
    bounds = [n]
    for s in range(num_stages - 1, -1, -1):
        bounds.append(back[s][bounds[-1]])
    return best[n], bounds[::-1]


#: Most state cells (devices × boundary pairs) one feasibility test of the paired-device bound visits;
#: above it (O(p n²) under V, O(p n³ / 6) under loop) the bound keeps its per-stage windows only.
PAIRED_MAX_CELLS = 400_000
#: Relative width at which the bisection of the paired-device bound stops (it reports the low end).
PAIRED_RTOL = 1e-5


def _paired_step(reach: set[tuple[int, int]], u: Callable[[int, int], float], v: Callable[[int, int], float],
                 T: float, i_max: int, j_range: range, right: bool) -> set[tuple[int, int]]:
    """The states ``(i', j')`` after one device: some reachable ``(i, j)`` has ``i < i'``, ``j > j'``
    (``right``: V, the second stage taken from the right end) or ``j < j'`` (loop), and ``u(i, j) +
    v(i', j') <= T``. Rows ``i'`` ascending keep the least ``u`` per ``j`` over ``i < i'``; within a row
    a running minimum over the dominated ``j``: ``O(n²)``."""
    by_row: dict[int, list[int]] = {}
    for i, j in reach:
        by_row.setdefault(i, []).append(j)
    rows = sorted(by_row)
    least: dict[int, float] = {}  # j -> least u(i, j) over reachable rows i < i'
    out: set[tuple[int, int]] = set()
    r = 0
    for i2 in range(rows[0] + 1, i_max + 1):
        while r < len(rows) and rows[r] < i2:
            for j in by_row[rows[r]]:
                least[j] = min(least.get(j, math.inf), u(rows[r], j))
            r += 1
        order = sorted(least, reverse=right)  # the dominated j first
        run, k = math.inf, 0
        for j2 in (reversed(j_range) if right else j_range):
            while k < len(order) and (order[k] > j2 if right else order[k] < j2):
                run = min(run, least[order[k]])
                k += 1
            if run + v(i2, j2) <= T:
                out.add((i2, j2))
    return out


def _paired_feasible(work: list[float], alpha: list[Callable[[int], float]], m: int,
                     placement: str) -> Callable[[float], bool] | None:
    """``feasible(T)``: does some split (v = 2) give every device ``alpha_d(b_d) + m · work(d) <= T``?

    ``work(d)`` sums device ``d``'s two stages (``d`` and ``2p − 1 − d`` under V, ``d`` and ``d + p``
    under loop), ``work`` the prefix sums of the layers' work. Devices are placed one at a time; the
    state is the pair of open boundaries: under V ``(i, j)``, the layers ``[i, j)`` the inner devices
    share (outside in); under loop ``(b_d, b_{d+p})`` for each end ``a = b_p`` of the first half. The cost
    of a device splits as ``u(i, j) + v(i', j')`` (:func:`_paired_step`). None when a test would visit
    more than :data:`PAIRED_MAX_CELLS` cells."""
    n, p, P = len(work) - 1, len(alpha), work
    if (p * n * n if placement == "v" else p * n ** 3 // 6) > PAIRED_MAX_CELLS:
        return None

    def v_fold(T: float) -> bool:
        reach = {(0, n)}
        for d in range(p - 1):
            inner = 2 * (p - 1 - d)  # layers the inner devices need at least
            reach = {(i, j) for i, j in _paired_step(
                reach, lambda i, j, d=d: alpha[d](i) - m * P[i] + m * P[j],
                lambda i, j: m * (P[i] - P[j]), T, n - inner - 1, range(inner + 1, n), True) if j - i >= inner}
            if not reach:
                return False
        return any(j - i >= 2 and alpha[p - 1](i) + m * (P[j] - P[i]) <= T for i, j in reach)

    def loop(T: float) -> bool:
        for a in range(p, n - p + 1):
            reach = {(0, a)}
            for d in range(p):
                rest = p - 1 - d  # stages still to come in each half
                reach = _paired_step(reach, lambda i, j, d=d: alpha[d](i) - m * P[i] - m * P[j],
                                     lambda i, j: m * (P[i] + P[j]), T, a - rest, range(a + 1, n - rest + 1), False)
                if not reach:
                    break
            if (a, n) in reach:
                return True
        return False

    return v_fold if placement == "v" else loop


def _least_paired(feasible: Callable[[float], bool], lo: float, hi: float) -> float:
    """The largest ``T`` in ``[lo, hi]`` found infeasible by bisection (``hi`` is a split's own value,
    so feasible): no split has every device under it. ``lo`` when ``lo`` is feasible already."""
    if feasible(lo):
        return lo
    while hi - lo > PAIRED_RTOL * hi:
        mid = (lo + hi) / 2
        if feasible(mid):
            hi = mid
        else:
            lo = mid
    return lo


def _makespan_window(table: LayerTable, release: list[float], m: int, fused: bool) -> Callable[[int, int, int], float]:
    """The largest of the four one-machine bounds of the module docstring for stage ``s`` = ``[i, j)``."""
    n, t = table.n, table
    w0 = 0.0 if fused else t.backward_weight(0, 1)

    def b(i: int, j: int) -> float:
        return t.backward_input(i, j) + (t.backward_weight(i, j) if fused else 0.0)

    def value(s: int, i: int, j: int) -> float:
        r = t.forward(0, i) + release[s]
        f, bb = t.forward(i, j), b(i, j)
        w = 0.0 if fused else t.backward_weight(i, j)
        return max(r + m * (f + bb + w),
                   r + m * (f + bb) + b(0, i) + w0,
                   t.forward(0, n) + b(j, n) + m * (bb + w),
                   r + m * f + t.forward(j, n) + b(0, n) + w0)

    return value


def window_split(layers: list[ExpandedLayer], cluster: Cluster, m: int) -> list[int]:
    """The bounds of a split whose stage windows are least (memory aside): balanced with the ramp in
    view, earlier stages taking more work than later ones, which start later."""
    table = LayerTable(layers)
    if cluster.objective == "stage_span":
        return _stage_windows(table, cluster.num_stages, lambda s, i, j: m * table.work(i, j))[1]
    c = min(cluster.link.time(x.output) for x in layers[:-1]) if len(layers) > 1 else 0.0
    release = [x * c for x in crossings_before(cluster)]
    return _stage_windows(table, cluster.num_stages,
                          _makespan_window(table, release, m, not cluster.split_backward))[1]


def _paired_devices(table: LayerTable, cluster: Cluster, m: int, alpha: list[Callable[[int], float]],
                    bounds: list[int], lo: float) -> float | None:
    """min over splits of ``max_d alpha_d(b_d) + m · work(d)`` for v = 2 (:func:`_paired_feasible`),
    bisected between ``lo`` and the value of the split ``bounds``; None when not computed."""
    if cluster.stages_per_device != 2:
        return None
    n, p = table.n, cluster.devices
    feasible = _paired_feasible([table.work(0, k) for k in range(n + 1)], alpha, m, cluster.placement)
    if feasible is None:
        return None
    where = stage_devices(cluster)
    work = [0.0] * p
    for s in range(cluster.num_stages):
        work[where[s]] += table.work(bounds[s], bounds[s + 1])
    hi = max(alpha[d](bounds[d]) + m * work[d] for d in range(p))
    return _least_paired(feasible, lo, hi * (1 + 1e-9) + 1e-9) if hi > lo else lo


def pair_free(layers: list[ExpandedLayer]) -> list[ExpandedLayer]:
    """Layers whose F and B are scaled by the least ``costs.overlap_fb`` any stage of theirs can get,
    when some carry ``comm`` (:func:`.induce.overlap_factor`: at least the compute share of F + B, which
    is at least the least compute share of any layer's F or B, and at least 1/2): an overlapped pair
    lasts at least that share of its F + B, so every bound over these layers holds for every split
    with pairs (as :meth:`Instance.without_overlap` does for one problem). Unchanged without comm."""
    if all(x.comm is None for x in layers):
        return layers
    share = 1.0
    for x in layers:
        if x.comm is not None:
            share = min([share, *((t - c) / t for t, c in zip((x.forward, x.backward_input), x.comm, strict=True)
                                   if t > 0)])  # a list: F = B = 0 leaves share alone (min(x) of one float raised)
    k = max(0.5, share)
    return [replace(x, forward=x.forward * k, backward_input=x.backward_input * k) for x in layers]


def plan_lower_bound(layers: list[ExpandedLayer], cluster: Cluster, m: int) -> PlanBound:
    """The bound of the module docstring for ``m`` microbatches (with overlapped pairs: on
    :func:`pair_free` layers)."""
    layers = pair_free(layers)
    table = LayerTable(layers)
    S, p, n = cluster.num_stages, cluster.devices, len(layers)
    total = table.work(0, n)
    c = min(cluster.link.time(x.output) for x in layers[:-1]) if n > 1 else 0.0
    x = crossings_before(cluster)
    release = [x[s] * c for s in range(S)]
    if cluster.objective == "stage_span":
        stage, split = _stage_windows(table, S, lambda s, i, j: m * table.work(i, j))
        value = m * max(stage / m, total / p)
        text = (f"stage_span >= m x max(least heaviest stage work {stage / m:.6g}, "
                f"total work / p {total / p:.6g}")
        paired = _paired_devices(table, cluster, m, [lambda i: 0.0] * p, split, value)
        if paired is not None and paired > value:
            value, text = paired, text + f", least busiest device work {paired / m:.6g}"
        turn = v_turn_devices(layers, cluster, m, [lambda i: 0.0] * p, x, c)
        if turn is not None and turn > value:
            value, text = turn, text + f", least busiest device span with the V turn {turn:.6g}"
        return PlanBound(value, text + ")")
    fused = not cluster.split_backward
    if cluster.split_backward:
        chain = math.fsum(x.forward + x.backward_input for x in layers) + layers[0].backward_weight
    else:
        chain = total
    chain += 2 * x[-1] * c
    window = _makespan_window(table, release, m, fused)
    stage, split = _stage_windows(table, S, window)
    lanes = lane_window(layers, cluster, m, release, x, c, fused, stage_devices(cluster))
    if lanes is not None:
        # the lanes can only matter below the lanes-included value of the split found without them
        top = max(max(window(s, split[s], split[s + 1]), lanes(s, split[s], split[s + 1])) for s in range(S))
        if stage < top < math.inf:
            capped, capped_split = _stage_windows(table, S, lambda s, i, j: v if (v := window(s, i, j)) >= top
                                                  else max(v, lanes(s, i, j)))
            if capped > stage:
                stage, split = capped, capped_split
    average = (m * total + math.fsum(table.forward_before(d) + x[d] * c for d in range(p))) / p
    terms = {"chain of one microbatch": chain, "stage windows (DP over splits)": stage,
             "average device": average}
    alpha = [lambda i, d=d: table.forward_before(i) + release[d]
             + (table.backward_input(0, i) + table.backward_weight(0, i) if fused else 0.0) for d in range(p)]
    paired = _paired_devices(table, cluster, m, alpha, split, max(terms.values()))
    if paired is not None:
        terms["device windows (bisection over splits)"] = paired
    if (turn := v_turn_devices(layers, cluster, m, alpha, x, c)) is not None:
        terms["device windows with the V turn (v_turn_window)"] = turn
    name = max(terms, key=lambda k: terms[k])
    detail = ", ".join(f"{k} {v:.6g}" for k, v in terms.items())
    return PlanBound(terms[name], f"max over splits-independent terms: {detail}; the largest is the {name}")


def split_bound(problem: Problem) -> float:
    """A lower bound on one induced problem's optimum, cheap enough to rank and prune candidate splits:
    the four stage windows of the module docstring with the problem's own stage costs and each
    boundary's own lag, and each device's earliest stage head plus all its
    work (with two stages per device the stage windows miss the pairing), or for ``stage_span`` the
    busiest device's work."""
    inst = Instance.from_problem(problem).without_overlap()  # with F&B pairs: its pair-free relaxation
    S, m = inst.num_stages, inst.microbatches
    if problem.objective == "stage_span":
        return max(inst.device_work())
    f, b = inst.duration["F"], inst.duration["B"]
    w = inst.duration.get("W", (0.0,) * S)
    lag = [0.0]  # lags before stage s, each boundary its own (``inst.comm`` is only their largest)
    for s in range(1, S):
        lag.append(lag[-1] + inst.link(s - 1, s))
    total, f_all, b_all = lag[-1], math.fsum(f), math.fsum(b)
    best = f_all + b_all + w[0] + 2 * total
    f_before = b_before = 0.0
    heads = []
    for s in range(S):
        r = f_before + lag[s]
        heads.append(r)
        f_after, b_after = f_all - f_before - f[s], b_all - b_before - b[s]
        best = max(best,
                   r + m * (f[s] + b[s] + w[s]),
                   r + m * (f[s] + b[s]) + b_before + lag[s] + w[0],
                   f_all + total + b_after + (total - lag[s]) + m * (b[s] + w[s]),
                   r + m * f[s] + f_after + (total - lag[s]) + b_all + total + w[0])
        f_before += f[s]
        b_before += b[s]
    for stages in inst.stages_of_device:  # the device is busy for all its work after its first head
        if stages:
            best = max(best, min(heads[s] for s in stages) + m * math.fsum(f[s] + b[s] + w[s] for s in stages))
    return best

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
- **average**: device d's ops start after ``Σ_{k < b_d} F_k + x_d · c`` (its first stage is ``d`` under
  loop and V placement) and all devices share ``m · Σ work``:
  ``(m · Σ_k work_k + Σ_{d < p} (Σ_{k < d} F_k + x_d · c)) / p``.

stage_span objective (each device's window from its first op): ``m · max(min-max stage work, Σ work / p)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from pipesched.solver import Instance, Problem

from .induce import stage_devices
from .model import Cluster, ExpandedLayer
from .sums import LayerTable


@dataclass(frozen=True)
class PlanBound:
    value: float
    derivation: str


def _crossings_before(cluster: Cluster) -> list[int]:
    """``x_s``: boundaries between different devices before stage ``s`` (fixed by the placement)."""
    where = stage_devices(cluster)
    out = [0]
    for s in range(1, len(where)):
        out.append(out[-1] + (where[s - 1] != where[s]))
    return out


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
    release = [x * c for x in _crossings_before(cluster)]
    return _stage_windows(table, cluster.num_stages,
                          _makespan_window(table, release, m, not cluster.split_backward))[1]


def plan_lower_bound(layers: list[ExpandedLayer], cluster: Cluster, m: int) -> PlanBound:
    """The bound of the module docstring for ``m`` microbatches."""
    table = LayerTable(layers)
    S, p, n = cluster.num_stages, cluster.devices, len(layers)
    total = table.work(0, n)
    c = min(cluster.link.time(x.output) for x in layers[:-1]) if n > 1 else 0.0
    x = _crossings_before(cluster)
    release = [x[s] * c for s in range(S)]
    if cluster.objective == "stage_span":
        stage, _ = _stage_windows(table, S, lambda s, i, j: m * table.work(i, j))
        value = m * max(stage / m, total / p)
        return PlanBound(value, f"stage_span >= m x max(least heaviest stage work {stage / m:.6g}, "
                                f"total work / p {total / p:.6g})")
    if cluster.split_backward:
        chain = math.fsum(x.forward + x.backward_input for x in layers) + layers[0].backward_weight
    else:
        chain = total
    chain += 2 * x[-1] * c
    stage, _ = _stage_windows(table, S, _makespan_window(table, release, m, not cluster.split_backward))
    average = (m * total + math.fsum(table.forward_before(d) + x[d] * c for d in range(p))) / p
    terms = {"chain of one microbatch": chain, "stage windows (DP over splits)": stage,
             "average device": average}
    name = max(terms, key=lambda k: terms[k])
    detail = ", ".join(f"{k} {v:.6g}" for k, v in terms.items())
    return PlanBound(terms[name], f"max over splits-independent terms: {detail}; the largest is the {name}")


def split_bound(problem: Problem) -> float:
    """A lower bound on one induced problem's optimum, cheap enough to rank and prune candidate splits:
    the four stage windows of the module docstring with the problem's own stage costs and comm (every
    lag between devices is exactly ``comm`` there), or for ``stage_span`` the busiest device's work."""
    inst = Instance.from_problem(problem)
    S, m, c = inst.num_stages, inst.microbatches, inst.comm
    if problem.objective == "stage_span":
        return max(inst.device_work())
    f, b = inst.duration["F"], inst.duration["B"]
    w = inst.duration.get("W", (0.0,) * S)
    x = [0]
    for s in range(1, S):
        x.append(x[-1] + (inst.device_of_stage[s - 1] != inst.device_of_stage[s]))
    total_x, f_all, b_all = x[-1], math.fsum(f), math.fsum(b)
    best = f_all + b_all + w[0] + 2 * total_x * c
    f_before = b_before = 0.0
    for s in range(S):
        r = f_before + x[s] * c
        f_after, b_after = f_all - f_before - f[s], b_all - b_before - b[s]
        best = max(best,
                   r + m * (f[s] + b[s] + w[s]),
                   r + m * (f[s] + b[s]) + b_before + x[s] * c + w[0],
                   f_all + total_x * c + b_after + (total_x - x[s]) * c + m * (b[s] + w[s]),
                   r + m * f[s] + f_after + (total_x - x[s]) * c + b_all + total_x * c + w[0])
        f_before += f[s]
        b_before += b[s]
    return best

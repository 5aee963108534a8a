"""Bound-guided splits: every split the cheap bounds leave a chance, ranked by a strong bound of each.

The rules propose a handful of splits by formula; the search then walks from the best of them. On
``benchmarks/plan.py``'s 8B, V = 32k, v = 2 loop case the best splits look like no rule (the input
module and a block each alone on a stage, the first devices' second stage carrying the most), and
the walk never got there: the rules' best split was proven optimal 2.4% above the bound over all
splits, while several splits met that bound. So, for a target ``T`` (the best step so far):

1. **enumerate** (:func:`surviving`) every split whose cheap lower bounds are under ``T``, by a
   depth-first search over stage ends that prunes with bounds valid for any recompute choice: the
   stage windows and memory lanes of :mod:`.bound` (per stage), each device's head plus ``m`` times
   its work so far (its later stages at least one layer each), and whether the devices with stages
   left can still hold the remaining work under ``T``;
2. **rank** them by the solver's analytic bound of the split's *relaxed* Problem
   (:func:`relaxed_problem`): plain costs (recompute only adds time), each layer's least activation
   memory at each point (plain or recomputed), no transient. Every schedule of the split with any
   recompute choice keeps its start times in the relaxed Problem (ops end no later, every microbatch
   holds no more at any instant), so the relaxed optimum, and its bound, is below the split's optimum
   whatever is recomputed (:func:`split_floor`; the argument in :func:`relaxed_problem`).

The search solves the least-ranked splits like moves (:meth:`.planner._Search.neighbours`). Counts
are capped (:data:`PLAN_SURVIVORS_MAX`, :data:`PLAN_SURVIVORS_RANKED`), never timed, so the result is
the same on any load.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from pipesched.solver import Instance, Memory, Problem
from pipesched.solver.bounds.analytic import lower_bound
from pipesched.solver.budget.planning import (
    PLAN_SURVIVORS_MAX,
    PLAN_SURVIVORS_RANKED,
    PLAN_SURVIVORS_VISITS,
)

from .bound import _makespan_window
from .induce import InfeasibleSplit, Split, crossings_before, induce, stage_devices
from .lanes import lane_window
from .model import Cluster, ExpandedLayer
from .sums import LayerTable

Bounds = tuple[int, ...]


def relaxed_problem(layers: list[ExpandedLayer], cluster: Cluster, bounds: Bounds, m: int) -> Problem | None:
    """The split's Problem with plain costs and each layer's least held memory (plain or recomputed)
    after F and after B, no transient, the devices' limits less their static memory; None when static
    memory alone overflows a device.

    Why it is a relaxation, for any recompute choice: keep every op's start. F and W end as before, a B
    no later. A microbatch of a stage holds ``h_F`` after F starts, ``max(h_F, h_B)`` while B runs (a
    positive B delta is taken at its start, a negative one given back at its end), ``h_B`` after B
    until W ends (the stage sums of its layers); the relaxed ``h_F``, ``h_B`` are at most the real ones
    layer by layer, so at every instant it holds at most what the real schedule holds, transients
    aside (which only add)."""
    free = cluster.model_copy(update={"memory_per_device": None})
    problem = induce(layers, free, Split.of(bounds), m)
    if cluster.memory_per_device is None:
        return problem
    where = stage_devices(cluster)
    after_f, after_b, static = [], [], [0.0] * cluster.devices
    for s in range(len(bounds) - 1):
        f = b = 0.0
        for x in layers[bounds[s]:bounds[s + 1]]:
            options = [(x.mem_forward, x.mem_backward_input)] + ([x.recompute[:2]] if x.recompute else [])
            f += min(o[0] for o in options)
            b += min(o[0] + o[1] for o in options)
            static[where[s]] += x.static
        after_f.append(f)
        after_b.append(b)
    limits = [cluster.memory(d) - static[d] for d in range(cluster.devices)]
    if min(limits) < 0:
        return None
    memory = Memory(forward=after_f, backward_input=[b - f for f, b in zip(after_f, after_b, strict=True)],
                    backward_weight=[-b for b in after_b], limit=limits)
    return Problem.model_validate({**problem.model_dump(), "memory": memory.model_dump()})


def split_floor(layers: list[ExpandedLayer], cluster: Cluster, bounds: Bounds, m: int) -> float:
    """A lower bound on every schedule of the split ``bounds`` with any recompute choice (inf: the
    split fits no device's memory whatever is recomputed)."""
    try:
        problem = relaxed_problem(layers, cluster, bounds, m)
    except InfeasibleSplit:
        return math.inf
    return math.inf if problem is None else lower_bound(Instance.from_problem(problem))


def _cheap(layers: list[ExpandedLayer], cluster: Cluster, m: int) -> tuple[Callable[[int, int, int], float],
                                                                            Callable[[int, int], float]]:
    """``value(s, i, j)``: stage ``s`` = ``[i, j)``'s windows and lanes (any recompute), and
    ``head(s, i)``: the earliest any op of stage ``s`` starting at layer ``i`` can run."""
    t = LayerTable(layers)
    c = min(cluster.link.time(x.output) for x in layers[:-1]) if len(layers) > 1 else 0.0
    x = crossings_before(cluster)
    release = [x[s] * c for s in range(cluster.num_stages)]
    if cluster.objective == "stage_span":
        return (lambda s, i, j: m * t.work(i, j)), (lambda s, i: 0.0)
    fused = not cluster.split_backward
    window = _makespan_window(t, release, m, fused)
    lanes = lane_window(layers, cluster, m, release, x, c, fused, stage_devices(cluster))
    memo: dict[tuple[int, int, int], float] = {}

    def value(s: int, i: int, j: int) -> float:
        key = (s, i, j)
        if key not in memo:
            memo[key] = max(window(s, i, j), lanes(s, i, j) if lanes is not None else 0.0)
        return memo[key]

    return value, (lambda s, i: t.forward_before(i) + release[s])


Cheap = tuple[Callable[[int, int, int], float], Callable[[int, int], float]]


def surviving(layers: list[ExpandedLayer], cluster: Cluster, m: int, target: float,
              most: int = PLAN_SURVIVORS_MAX, cheap: Cheap | None = None) -> list[tuple[float, Bounds]] | None:
    """Every split whose cheap bounds (module docstring) are all under ``target``, each with the largest
    of them, or None when there are more than ``most`` or the search visits more than
    ``PLAN_SURVIVORS_VISITS * most`` stage ends (the target is too loose to enumerate)."""
    t, n, S, p = LayerTable(layers), len(layers), cluster.num_stages, cluster.devices
    where = stage_devices(cluster)
    value, head = cheap if cheap is not None else _cheap(layers, cluster, m)
    first = [where.index(d) for d in range(p)]
    later = [sum(where[u] == where[s] for u in range(s + 1, S)) for s in range(S)]
    least = min(t.work(k, k + 1) for k in range(n))
    work, start = [0.0] * p, [0] * p
    out: list[tuple[float, Bounds]] = []
    bounds = [0]
    scale = 1.0 if cluster.objective == "stage_span" else float(m)
    visits = [0]

    ahead = [sorted({where[u] for u in range(s + 1, S)}) for s in range(S)]  # devices with stages after s

    def room(s: int, j: int) -> float:
        """Work the devices with stages after ``s`` can still take under ``target``."""
        return math.fsum((target - head(first[d], start[d] if first[d] <= s else j)) / scale - work[d]
                         for d in ahead[s])

    def walk(s: int, i: int, worst: float) -> bool:
        if s == S:
            out.append((worst, tuple(bounds)))
            return len(out) <= most
        d = where[s]
        for j in range(i + 1, n - (S - s - 1) + 1):
            visits[0] += 1
            if visits[0] > PLAN_SURVIVORS_VISITS * most:
                return False
            w = t.work(i, j)
            st = i if first[d] == s else start[d]
            device = head(first[d], st) + scale * (work[d] + w + later[s] * least)
            if device >= target:
                break  # more layers only add work to the device
            v = value(s, i, j)
            if v >= target:
                continue
            kept = work[d], start[d]
            work[d], start[d] = work[d] + w, st
            fits = room(s, j) >= t.work(j, n) * (1 - 1e-12)
            if fits:
                bounds.append(j)
                done = walk(s + 1, j, max(worst, v, device))
                bounds.pop()
            work[d], start[d] = kept
            if fits and not done:
                return False
        return True

    return out if walk(0, 0, 0.0) else None


def ranked(layers: list[ExpandedLayer], cluster: Cluster, m: int, target: float, floor: float) -> list[Bounds]:
    """The splits that may beat ``target``, least :func:`split_floor` first: the surviving splits under
    ``target`` (when too many, under the largest of the targets ``floor + (target - floor) / 2^k``,
    ``k`` = 6 .. 1, that still enumerates), the :data:`PLAN_SURVIVORS_RANKED` of least cheap bound
    ranked by their floor."""
    cheap = _cheap(layers, cluster, m)
    found = surviving(layers, cluster, m, target, cheap=cheap)
    for k in range(6 if found is None else 0, 0, -1):  # from just above the floor upwards
        trial = surviving(layers, cluster, m, floor + (target - floor) / 2 ** k, cheap=cheap)
        if trial is None:
            break
        found = trial
    if not found:
        return []
    best = sorted(found)[:PLAN_SURVIVORS_RANKED]
    floors = sorted((split_floor(layers, cluster, b, m), b) for _, b in best)
    return [b for f, b in floors if f < target]

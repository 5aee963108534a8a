"""Layer splits: the balanced DP, an AdaPipe-style DP and the rules practitioners use by hand.

Every rule returns a :class:`~pipesched.solver.planning.induce.Split` (contiguous non-empty stages
with a recompute flag each) or None when it finds no split that fits memory.

**Memory estimate.** Rules cannot see a schedule, so they size memory the way 1F1B-family schedules
fill it: stage ``s`` of ``S`` holds ``k_s = min(m, S − s)`` microbatches in flight between F and B
(1F1B's ``p − s`` for v = 1; within one chunk of Megatron's interleaved warm-up count for loop
placement, and of ZB-V's ``2p`` chunks per device for V), each holding its F delta, while one B at a
time adds its positive delta and the recompute transient. A device fits when
``Σ_{s on d} (static_s + k_s · ΔF_s) + max_s (max(ΔB_s, 0) + transient_s) <= memory_d``. The solver then schedules
under the exact limit of :mod:`.induce`, so a wrong estimate costs speed, never validity.

**Balanced DP** (``balanced``): the least ``C*`` such that every stage's per-microbatch work
``F + B + W`` (recompute adding F to B) is at most ``C*`` and fits memory (a min-max linear partition,
O(S·n²)), then, among those splits, the one with the least recompute work. For v = 1 a stage is a
device, so ``C*`` is the heaviest device's work; for v ≥ 2 stages are balanced, each device carrying
at most ``v · C*``, and a stage is checked against its device's memory in proportion to its ``k_s``.

**AdaPipe-style DP** (Sun et al., "AdaPipe: Optimizing Pipeline Parallelism with Adaptive Recomputation
and Partitioning", ASPLOS 2024): partition and per-stage recompute minimising the 1F1B step estimate
``(m·v − 1) · max_s t_s + Σ_s t_s / v`` (for v = 1, ``(m − 1) · max + Σ``: the ramp plus ``m − 1`` steady
steps of the slowest stage). For each cap ``C >= C*`` the least-recompute DP gives ``Σ t_s``; caps are
the distinct stage times above ``C*`` until ``(m·v − 1)(C − C*)`` exceeds the recompute saved.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from .induce import Split, stage_devices
from .model import Cluster, ExpandedLayer
from .sums import LayerTable

INF = math.inf
#: How many caps above C* the AdaPipe-style DP tries at most (each is one O(S·n²) DP).
MAX_CAPS = 48


def _le(a: float, b: float) -> bool:
    return a <= b * (1 + 1e-12) + 1e-12


@dataclass
class SplitContext:
    """What every rule reads: the layer sums, the cluster and the microbatch count."""

    table: LayerTable
    cluster: Cluster
    microbatches: int
    shared: bool = True  # check a stage against its k-share of the device's memory (else all of it)
    inflight: tuple[int, ...] | None = None  # ``k_s`` other than 1F1B's (:mod:`.paced`)

    @classmethod
    def of(cls, layers: list[ExpandedLayer], cluster: Cluster, microbatches: int) -> SplitContext:
        return cls(LayerTable(layers), cluster, microbatches)

    def loosened(self) -> SplitContext:
        return SplitContext(self.table, self.cluster, self.microbatches, shared=False, inflight=self.inflight)

    def __post_init__(self) -> None:
        self.S = self.cluster.num_stages
        self.device = stage_devices(self.cluster)
        self.k = (list(self.inflight) if self.inflight is not None
                  else [min(self.microbatches, self.S - s) for s in range(self.S)])
        per_device = [0] * self.cluster.devices
        for s, d in enumerate(self.device):
            per_device[d] += self.k[s]
        self.budget = [self.cluster.memory(self.device[s])
                       * (self.k[s] / per_device[self.device[s]] if self.shared else 1.0) for s in range(self.S)]

    def demand(self, s: int, i: int, j: int, rc: bool) -> float:
        t = self.table
        return t.static(i, j) + self.k[s] * t.held(i, j, rc) + t.backward_extra(i, j, rc) + t.transient(i, j, rc)

    def choice(self, s: int, i: int, j: int, cap: float = INF) -> bool | None:
        """Recompute flag for stage ``s`` = layers ``[i, j)``: False when it fits as is, True when it
        fits only recomputed, None when neither fits (or exceeds ``cap``)."""
        t = self.table
        if _le(self.demand(s, i, j, False), self.budget[s]) and _le(t.work(i, j), cap):
            return False
        if t.can_recompute(i, j) and _le(self.demand(s, i, j, True), self.budget[s]) \
                and _le(t.work(i, j, True), cap):
            return True
        return None

    def device_demand(self, split: Split, d: int) -> float:
        mine = [s for s in range(self.S) if self.device[s] == d]
        t, b, rc = self.table, split.bounds, split.recompute
        return (sum(t.static(b[s], b[s + 1]) + self.k[s] * t.held(b[s], b[s + 1], rc[s]) for s in mine)
                + max(t.transient(b[s], b[s + 1], rc[s]) + t.backward_extra(b[s], b[s + 1], rc[s]) for s in mine))

    def with_recompute(self, bounds: list[int] | tuple[int, ...],
                       initial: tuple[bool, ...] | None = None) -> Split | None:
        """``bounds`` with recompute (beyond ``initial``) only where the memory estimate needs it (the
        stage saving the most first), or None when even full recompute does not fit."""
        t = self.table
        rc = list(initial) if initial is not None else [False] * self.S
        for d in range(self.cluster.devices):
            mine = [s for s in range(self.S) if self.device[s] == d]
            while not _le(self.device_demand(Split.of(bounds, rc), d), self.cluster.memory(d)):
                options = [s for s in mine if not rc[s] and t.can_recompute(bounds[s], bounds[s + 1])]
                if not options:
                    return None
                best = max(options, key=lambda s: self.k[s] * (t.held(bounds[s], bounds[s + 1])
                                                               - t.held(bounds[s], bounds[s + 1], True)))
                rc[best] = True
        return Split.of(bounds, rc)


def _stage_ranges(ctx: SplitContext, s: int) -> tuple[int, int]:
    """Ends ``j`` stage ``s`` may have, leaving at least one layer for every later stage."""
    return s + 1, ctx.table.n - (ctx.S - s - 1)


def min_max_cap(ctx: SplitContext) -> float:
    """``C*``: the least possible heaviest stage work over memory-feasible splits (INF if none)."""
    t, n = ctx.table, ctx.table.n
    best = [INF] * (n + 1)
    best[0] = 0.0
    for s in range(ctx.S):
        lo, hi = _stage_ranges(ctx, s)
        nxt = [INF] * (n + 1)
        for j in range(lo, hi + 1):
            for i in range(j - 1, s - 1, -1):
                if best[i] == INF:
                    continue
                if t.work(i, j) >= nxt[j]:
                    break  # stages only get heavier as they start earlier
                rc = ctx.choice(s, i, j)
                if rc is not None:
                    nxt[j] = min(nxt[j], max(best[i], t.work(i, j, rc)))
        best = nxt
    return best[n]


def least_recompute(ctx: SplitContext, cap: float | list[float]) -> tuple[Split, float] | None:
    """The split with every stage's work <= ``cap`` (one for all, or one per stage) and memory fitting
    that recomputes the least work, with that recompute work (None if no split meets the caps).
    O(S · n · L) with L the most layers a stage can hold under its cap."""
    t, n = ctx.table, ctx.table.n
    caps = cap if isinstance(cap, list) else [cap] * ctx.S
    best = [INF] * (n + 1)
    best[0] = 0.0
    back: list[list[tuple[int, bool]]] = []
    for s in range(ctx.S):
        lo, hi = _stage_ranges(ctx, s)
        nxt, arg = [INF] * (n + 1), [(-1, False)] * (n + 1)
        for j in range(lo, hi + 1):
            for i in range(j - 1, s - 1, -1):
                if t.work(i, j) > caps[s] * (1 + 1e-12) + 1e-12:
                    break
                if best[i] == INF:
                    continue
                rc = ctx.choice(s, i, j, caps[s])
                if rc is None:
                    continue
                value = best[i] + (t.recompute_extra(i, j) if rc else 0.0)
                if value < nxt[j]:
                    nxt[j], arg[j] = value, (i, rc)
        best = nxt
        back.append(arg)
    if best[n] == INF:
        return None
    bounds, flags, j = [n], [], n
    for s in range(ctx.S - 1, -1, -1):
        i, rc = back[s][j]
        bounds.append(i)
        flags.append(rc)
        j = i
    return Split.of(bounds[::-1], flags[::-1]), best[n]


def _loosened(rule: Callable[[SplitContext], Split | None]) -> Callable[[SplitContext], Split | None]:
    """With v >= 2, when no split fits the per-stage shares, search with each stage against its whole
    device, then add recompute where the device-level estimate needs it."""

    def run(ctx: SplitContext) -> Split | None:
        found = rule(ctx)
        if found is None and ctx.shared and ctx.cluster.devices < ctx.S:
            loose = rule(ctx.loosened())
            found = ctx.with_recompute(loose.bounds, loose.recompute) if loose is not None else None
        return found

    run.__doc__ = rule.__doc__
    return run


@_loosened
def balanced(ctx: SplitContext) -> Split | None:
    """The balanced-split DP (module docstring)."""
    cap = min_max_cap(ctx)
    found = least_recompute(ctx, cap) if cap < INF else None
    return found[0] if found else None


@_loosened
def adapipe(ctx: SplitContext) -> Split | None:
    """The AdaPipe-style DP (module docstring): least ``(m·v − 1)·max + Σ t / v`` over caps."""
    c0 = min_max_cap(ctx)
    if c0 == INF:
        return None
    t, v, steady = ctx.table, ctx.cluster.stages_per_device, ctx.microbatches * ctx.cluster.stages_per_device - 1
    base = t.work(0, t.n)
    found = least_recompute(ctx, c0)
    if found is None:
        return None
    best_split, extra0 = found
    best_time = steady * c0 + (base + extra0) / v
    horizon = c0 + extra0 / v / max(steady, 1)
    caps = sorted({t.work(i, j, rc) for i in range(t.n) for j in range(i + 1, t.n + 1) for rc in (False, True)
                   if c0 < t.work(i, j, rc) <= horizon})
    for cap in caps[:MAX_CAPS]:
        found = least_recompute(ctx, cap)
        if found is not None and steady * cap + (base + found[1]) / v < best_time:
            best_time, best_split = steady * cap + (base + found[1]) / v, found[0]
    return best_split


def family(kind: str) -> str:
    """A layer kind's family: its name up to the first ``.`` or ``#`` (``block.moe`` and
    ``block.dense`` are both blocks; the profiler names a second kind of one module type ``block#2``)."""
    return re.split(r"[.#]", kind, maxsplit=1)[0]


def core(layers: list[ExpandedLayer]) -> tuple[int, int]:
    """``[first, last)`` of the transformer blocks: the span of the most repeated family of layer kinds
    (ties: the earliest), so dense and MoE blocks are blocks alike; what comes before is the input
    module, after it the output module (with a multi-token-prediction layer)."""
    kind = Counter(family(x.kind) for x in layers).most_common(1)[0][0]
    idx = [x.index for x in layers if family(x.kind) == kind]
    return idx[0], idx[-1] + 1


def _even(total: int, parts: int) -> list[int]:
    """``total`` items in ``parts`` near-equal counts, the first ``total % parts`` one larger."""
    return [total // parts + (1 if p < total % parts else 0) for p in range(parts)]


def _bounds_from_counts(first: int, counts: list[int], n: int) -> list[int]:
    bounds = [0]
    for c in counts:
        bounds.append(bounds[-1] + c)
    bounds = [0] + [first + b for b in bounds[1:-1]] + [n]
    return bounds


def uniform(ctx: SplitContext, layers: list[ExpandedLayer]) -> Split | None:
    """Blocks split evenly over the stages, the input module on the first, the output on the last."""
    lo, hi = core(layers)
    if hi - lo < ctx.S:
        return ctx.with_recompute(_bounds_from_counts(0, _even(len(layers), ctx.S), len(layers)))
    return ctx.with_recompute(_bounds_from_counts(lo, _even(hi - lo, ctx.S), len(layers)))


def torchtitan(ctx: SplitContext, layers: list[ExpandedLayer]) -> Split | None:
    """torchtitan's ``generate_llm_fqn_per_model_part`` with its default weights
    (``pipeline_parallel_first/last_stage_less_layers = 1``): the ``L`` blocks plus one unit for the
    input and one for the output module are split evenly, the first ``(L + 2) % S`` stages one unit
    larger; the first stage holds the input module and one block fewer than its share, the last stage
    the output module and one fewer (also when the model has no separate input or output layer, as
    torchtitan counts the weight regardless). torchtitan refuses ``S > L + 2``; so does this rule."""
    lo, hi = core(layers)
    n, S = len(layers), ctx.S
    if S == 1:
        return ctx.with_recompute([0, n])
    share = _even(hi - lo + 2, S)
    counts = [share[0] - 1, *share[1:-1], share[-1] - 1]
    if share[-1] == 0 or any(c < 1 for c in counts[1:-1]) or (counts[0] == 0 and lo == 0) \
            or (counts[-1] == 0 and hi == n):
        return None  # an empty stage: torchtitan raises (more stages than effective layers)
    return ctx.with_recompute(_bounds_from_counts(lo, counts, n))


def megatron(ctx: SplitContext, layers: list[ExpandedLayer]) -> Split | None:
    """Megatron-LM's ``--decoder-first/last-pipeline-num-layers``: ``f`` and ``l`` blocks on the first
    and last stage (with the input and output modules), the rest even over the middle; the best
    ``(f, l)`` with ``f, l <=`` the even count by heaviest stage work, then least recompute."""
    lo, hi = core(layers)
    blocks, S, n = hi - lo, ctx.S, len(layers)
    if S == 1:
        return ctx.with_recompute([0, n])
    if blocks < S:
        return uniform(ctx, layers)
    even = math.ceil(blocks / S)
    best: tuple[float, float, Split] | None = None
    for f in range(1, even + 1):
        for last in range(1, even + 1):
            middle = blocks - f - last
            if S == 2 and middle != 0 or S > 2 and middle < S - 2:
                continue
            counts = [f, *(_even(middle, S - 2) if S > 2 else []), last]
            split = ctx.with_recompute(_bounds_from_counts(lo, counts, n))
            if split is None:
                continue
            b, t = split.bounds, ctx.table
            heaviest = max(t.work(b[s], b[s + 1], split.recompute[s]) for s in range(S))
            extra = sum(t.recompute_extra(b[s], b[s + 1]) for s in range(S) if split.recompute[s])
            if best is None or (heaviest, extra) < best[:2]:
                best = (heaviest, extra, split)
    return best[2] if best else None


@_loosened
def chunk_balanced(ctx: SplitContext) -> Split | None:
    """v = 2: balance devices, not stages. Device d holds one stage of each chunk (stage d and, under
    loop placement, d + p; under V, 2p − 1 − d), so with a cap ``c_1`` on the first chunk's stages and
    ``c_2`` on the second's every device carries at most ``c_1 + c_2``. The least ``c_1 + c_2`` over the
    stage works up to ``C*`` is found by two pointers (the least feasible ``c_2`` only grows as ``c_1``
    shrinks), then the least-recompute split under those caps. None for v != 2."""
    if ctx.cluster.stages_per_device != 2:
        return None
    c_star, t, p = min_max_cap(ctx), ctx.table, ctx.cluster.devices
    if c_star == INF:
        return None
    values: set[float] = set()
    for i in range(t.n):
        for j in range(i + 1, t.n + 1):
            if t.work(i, j) > c_star * (1 + 1e-12):
                break
            values |= {t.work(i, j, rc) for rc in (False, True) if _le(t.work(i, j, rc), c_star)}
    caps = sorted({float(f"{x:.12g}") for x in values} | {c_star})

    def split(c1: float, c2: float) -> tuple[Split, float] | None:
        return least_recompute(ctx, [c1] * p + [c2] * p)

    best: tuple[float, Split] | None = None
    k2 = 0
    for c1 in reversed(caps):
        while k2 < len(caps) and split(c1, caps[k2]) is None:
            k2 += 1
        if k2 == len(caps):
            break
        if best is None or c1 + caps[k2] < best[0]:
            found = split(c1, caps[k2])
            assert found is not None
            best = (c1 + caps[k2], found[0])
    return ctx.with_recompute(best[1].bounds, best[1].recompute) if best else None


def device_balanced(ctx: SplitContext, start: Split | None, max_rounds: int = 200) -> Split | None:
    """``start`` improved by *transfers* while they lower the devices' work sorted from the largest down
    (compared lexicographically, so a move off one of several equally busiest devices counts): a
    transfer shifts the boundaries between stages ``a < c`` by one layer, so ``a`` gains a layer, ``c``
    loses one and the stages between keep their size (one layer moves the whole way, which single
    boundary moves cannot do when the stages between sit on equally busy devices). Every device stays
    within the memory estimate. A no-op for v = 1 (the balanced DP already minimises the busiest device)."""
    if start is None or ctx.cluster.devices == ctx.S:
        return start
    t, S = ctx.table, ctx.S
    b, rc = list(start.bounds), start.recompute

    def loads(bounds: list[int]) -> list[float]:
        out = [0.0] * ctx.cluster.devices
        for s in range(S):
            out[ctx.device[s]] += t.work(bounds[s], bounds[s + 1], rc[s])
        return out

    def key(bounds: list[int]) -> list[float]:
        return sorted((round(x, 9) for x in loads(bounds)), reverse=True)

    current = key(b)
    for _ in range(max_rounds):
        best: tuple[list[float], list[int]] | None = None
        for a in range(S):
            for c in range(a + 1, S):
                for step in (1, -1):  # +1: stage a gains a layer from c; -1: a gives one to c
                    moved = b[:a + 1] + [x + step for x in b[a + 1:c + 1]] + b[c + 1:]
                    if any(moved[s + 1] <= moved[s] for s in (a, c)):
                        continue
                    k = key(moved)
                    if k < current and (best is None or k < best[0]) and all(
                            _le(ctx.device_demand(Split.of(moved, rc), d), ctx.cluster.memory(d))
                            for d in {ctx.device[s] for s in range(a, c + 1)}):
                        best = (k, moved)
        if best is None:
            break
        current, b = best
    return Split.of(b, rc)

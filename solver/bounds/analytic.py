"""Analytic lower bounds on the objective, valid for every schedule of a problem.

Every bound here is a *relaxation*: it keeps only some of the rules (one device's no-overlap,
one microbatch's dependency chain) and drops the rest (other devices' capacity, memory limits),
so it can never exceed a true optimum. ``tests/solver/test_bounds.py`` checks that against
brute force on tiny problems.

The dependency graph of one microbatch is a single chain ``F(0) → … → F(S-1) → B(S-1) → … →
B(0)`` with ``W(s)`` hanging off ``B(s)``. So for any op "class" ``X = (kind, stage)``:

- ``head(X)``: earliest start of ``X`` for any microbatch, the chain before it with comm;
- ``tail(X)``: least time that must pass after ``X`` ends until its microbatch's last op ends;
- distances between two classes of the same microbatch are differences of chain times.

**One-machine subset bound (Carlier).** Take any set ``J`` of ops on one device. None starts
before ``min_J head``, they run one at a time (``sum_J p``), and after the last one ends at
least ``min_J tail`` must still pass, so ``makespan >= min_J head + sum_J p + min_J tail``.
All ``m`` ops of a class share head, duration and tail, so it suffices to try
``J = {classes of the device with head >= a and tail >= b}`` for every head value ``a`` and tail
value ``b`` (the maximum over all subsets is reached at such a set). ``J`` = the last device's
ops gives ``(p-1)F + m(F+B+W)`` for uniform costs; ``J`` = the F ops of stage 0 gives
``m·F(0) +`` the rest of the last microbatch's chain (a device's last op and drain).

**Stage span.** Let ``t0`` be the first start on device ``d``: it is an ``F`` of the lowest stage
``s_d`` on ``d`` (every op of a microbatch on ``d`` descends from its ``F(s_d)``). So an op ``X`` of
``d`` starts no earlier than ``t0 + head(X) - head(F(s_d))`` (the ramp of the microbatch it starts
with), and the device's last end is no earlier than ``end(X) + `` the chain from ``X`` to the last
op of the same microbatch *on ``d``*. The same subset bound with these relative heads and tails
bounds ``d``'s span; e.g. ``J = {B, W of d}`` forces the round trip ``F + (forward and backward
through the later stages) + m(B+W)``. Since ``makespan >= first start on d + span of d``,
``head(F(s_d)) + span bound of d`` bounds the makespan too.

**Microbatch ranks (makespan, and each device's span in its own frame).** Ops of one class on
one device run one at a time, so they start and end in the same order. The ``j``-th of them to start (from 0) belongs to a microbatch among
the first ``j + 1`` whose upstream class ``Y`` ran, and those ``j + 1`` ``Y`` ops are serial on
``Y``'s device: its head is at least ``head(X) + j·g``, ``g`` the longest upstream class duration.
Symmetrically the ``k`` last to end feed ``k`` serial ops of a downstream class ``Z``, which
stretches the earliest of them's tail to ``head(Z) + k·dur(Z) + tail(Z) - end(X)``.
Jackson's preemptive schedule on these per-op heads and tails is the exact one-machine
preemptive optimum (Carlier's bound), a relaxation of the device. Used up to
:data:`RANK_BOUND_MAX_OPS` ops (it is ``O(n log n)`` in Python).

**Memory lanes.** When every microbatch-stage on device ``d`` holds a non-negative amount of
memory at all times (``dF >= 0`` and ``dF + dB >= 0`` on each of its stages), microbatch ``i`` holds
at least ``dF(s)`` from ``F(s, i)``'s start until ``B(s, i)``'s end, an interval at least the round
trip ``R(s)`` long. At most ``k = floor(limit / dF(s))`` such intervals overlap, so they fit in
``k`` lanes (interval graphs are perfect) and one lane holds ``ceil(m / k)`` disjoint intervals:
the span is at least ``ceil(m / k) R(s)`` (+ ``W(s)``, which follows the last ``B``). Split, it
also holds ``min(dF, dF + dB)`` until ``W(s, i)`` ends: ``ceil(m / k') (R(s) + W(s))``.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..budget import RANK_BOUND_MAX_OPS, RANK_SPAN_MAX_WORK
from ..core.instance import Instance, OpId
from ..core.tolerance import cap_with_slack
from .chain import OpClass, op_classes
from .dual import dual_bound
from .held_w import held_w_bound
from .turn_relay import turn_relay_bound


def subset_bound(jobs: Sequence[tuple[float, float, float]]) -> float:
    """``max_J min_J head + sum_J work + min_J tail`` over (head, work, tail) jobs on one machine.

    The maximum is reached at ``J = {head >= a, tail >= b}`` for some job heads ``a`` and tails ``b``.
    """
    best = 0.0
    for a in {h for h, _, _ in jobs}:
        chosen = sorted(((q, w) for h, w, q in jobs if h >= a), reverse=True)
        total = 0.0
        for q, w in chosen:  # tails descending: the set {tail >= q}
            total += w
            best = max(best, a + total + q)
    return best


def jackson_preemptive(jobs: Sequence[tuple[float, float, float]]) -> float:
    """``max(C_j + q_j)`` of Jackson's preemptive schedule for (head, work, tail) jobs.

    At every moment run the released job with the largest tail, preempting on each release:
    optimal for one machine with preemption, so a lower bound without it.
    """
    ordered = sorted(jobs)
    heap: list[tuple[float, float]] = []
    t, i, best = 0.0, 0, 0.0
    while i < len(ordered) or heap:
        if not heap:
            t = max(t, ordered[i][0])
        while i < len(ordered) and ordered[i][0] <= t:
            r, work, q = ordered[i]
            heapq.heappush(heap, (-q, work))
            i += 1
        neg_q, left = heapq.heappop(heap)
        run = min(left, (ordered[i][0] if i < len(ordered) else math.inf) - t)
        t += run
        if left - run > 1e-12:
            heapq.heappush(heap, (neg_q, left - run))
        else:
            best = max(best, t - neg_q)
    return best


@dataclass(frozen=True)
class _Chain:
    """One microbatch's chain of classes in order, with the W hanging off each B."""

    classes: dict[OpId, OpClass]
    chain: list[OpId]

    @classmethod
    def of(cls, inst: Instance) -> _Chain:
        S = inst.num_stages
        chain = [OpId("F", s, 0) for s in range(S)] + [OpId("B", s, 0) for s in reversed(range(S))]
        return cls({c.op: c for c in op_classes(inst)}, chain)

    def position(self, op: OpId) -> int:
        return self.position_in(len(self.chain) // 2)(op)

    @staticmethod
    def position_in(stages: int) -> Callable[[OpId], int]:
        """Chain position of an op in a model of ``stages`` stages; a W sits at its B's position."""
        return lambda op: op.stage if op.kind == "F" else 2 * stages - 1 - op.stage

    def group(self, k: int) -> list[OpClass]:
        """The chain class at position ``k`` and the W hanging off it."""
        op = self.chain[k]
        w = OpId("W", op.stage, 0)
        return [self.classes[op], self.classes[w]] if op.kind == "B" and w in self.classes else [self.classes[op]]


def _rank_jobs(ch: _Chain, mine: list[OpClass], first: int, latest: Callable[[OpClass], float],
               m: int) -> list[tuple[OpClass, tuple[float, float, float]]]:
    """Each op of ``mine`` as its class and (head, duration, tail), by rank (module docstring).

    Heads: the ``j``-th (from 0) ``X`` op to start waits for ``j + 1`` serial ops of an upstream
    class ``Y`` (from chain position ``first`` on): ``head(X) + j·dur(Y)``; the chain to ``X`` is
    one path, so distances are head differences. Tails: the ``k`` last ``X`` ops to end feed ``k``
    serial ops of a downstream class ``Z``, and ``latest(Z)`` is the latest end one ``Z`` op forces
    in the frame: the earliest of them has tail ``max_Z head(Z) + k·dur(Z) + latest(Z) - end(Z)
    - end(X)``.
    """
    n = len(ch.chain)
    before = [0.0] * (n + 1)  # before[k]: longest class duration among chain[first:k]
    for k in range(first, n):
        before[k + 1] = max(before[k], ch.classes[ch.chain[k]].duration)

    def reach(c: OpClass, count: int) -> float:
        return c.head + count * c.duration + latest(c) - (c.head + c.duration)

    jobs = []
    for count in range(1, m + 1):  # the `count` ops of a class that end last
        suffix = [-math.inf] * (n + 1)  # suffix[k]: max reach over chain[k:] and their Ws
        for k in reversed(range(first, n)):
            suffix[k] = max([suffix[k + 1], *(reach(c, count) for c in ch.group(k))])
        j = m - count  # start rank of the earliest of them
        for c in mine:
            k = ch.position(c.op)
            if c.op.kind == "W":
                head, down = c.head + j * before[k + 1], -math.inf
            else:
                head = c.head + j * before[k]
                down = max([suffix[k + 1], *(reach(x, count) for x in ch.group(k)[1:])])
            jobs.append((c, (head, c.duration, max(0.0, down - c.head - c.duration))))
    return jobs


def rank_makespan_bound(inst: Instance) -> float:
    """Per-device Jackson bound with per-microbatch-rank heads and tails (:func:`_rank_jobs`)."""
    if inst.num_stages * inst.microbatches * len(inst.kinds) > RANK_BOUND_MAX_OPS:
        return 0.0
    ch = _Chain.of(inst)
    per_device: list[list[tuple[float, float, float]]] = [[] for _ in range(inst.devices)]
    everything = list(ch.classes.values())
    for c, job in _rank_jobs(ch, everything, 0, lambda c: c.head + c.duration + c.tail, inst.microbatches):
        per_device[inst.device(c.op)].append(job)
    return max((jackson_preemptive(jobs) for jobs in per_device if jobs), default=0.0)


def rank_span_bounds(inst: Instance) -> list[float]:
    """Per-device span bound: Jackson's schedule on per-rank heads and tails relative to the device.

    As :func:`rank_makespan_bound`, measured from the device's first start ``t0`` (an ``F`` of its
    lowest stage ``s_d``) and to its last end ``T_d``. Upstream classes count only from ``F(s_d)`` on
    (their ops start after ``t0``); a downstream class ``Z`` counts with the latest end it forces
    *on this device* (``Z`` itself or a descendant of it on ``d``), since only those lie before ``T_d``.
    """
    S, m, p = inst.num_stages, inst.microbatches, inst.devices
    if p * m * 2 * S > RANK_SPAN_MAX_WORK:
        return [0.0] * p
    ch = _Chain.of(inst)
    return [_rank_span_of_device(inst, d, ch) if stages else 0.0 for d, stages in enumerate(inst.stages_of_device)]


def _rank_span_of_device(inst: Instance, d: int, ch: _Chain) -> float:
    first = min(inst.stages_of_device[d])  # chain position of F(s_d)
    t_first = ch.classes[OpId("F", first, 0)].head
    n = len(ch.chain)
    on_d_after = [-math.inf] * (n + 1)  # latest chain end of an op on d among chain[k:] and their Ws
    for k in reversed(range(n)):
        ends = [c.head + c.duration for c in ch.group(k) if inst.device(c.op) == d]
        on_d_after[k] = max([on_d_after[k + 1], *ends])

    def latest(c: OpClass) -> float:
        """Latest chain end on d among ``c`` and its descendants (-inf if none)."""
        if c.op.kind == "W":
            return c.head + c.duration if inst.device(c.op) == d else -math.inf
        k = ch.position(c.op)
        return max([on_d_after[k + 1], *(x.head + x.duration for x in ch.group(k) if inst.device(x.op) == d)])

    mine = [c for c in ch.classes.values() if inst.device(c.op) == d]
    jobs = _rank_jobs(ch, mine, first, latest, inst.microbatches)
    return jackson_preemptive([(h - t_first, w, q) for _, (h, w, q) in jobs])


def _device_classes(inst: Instance) -> list[list[OpClass]]:
    out: list[list[OpClass]] = [[] for _ in range(inst.devices)]
    for c in op_classes(inst):
        out[inst.device(c.op)].append(c)
    return out


def _relative_jobs(inst: Instance, classes: list[OpClass]) -> list[tuple[float, float, float]]:
    """(head, work, tail) of a device's classes relative to its own first start and last end.

    Relative head: ``head(X) - head(F(s_d))``. Relative tail: the latest end among ``X``'s
    descendants on the same device, minus ``X``'s own end along the chain (0 if none).
    """
    first = min(c.head for c in classes)  # F of the device's lowest stage
    position = _Chain.position_in(inst.num_stages)

    def descends(z: OpId, x: OpId) -> bool:
        """Is ``z`` a later op of the same microbatch than ``x``? (A W sits at its B's position.)"""
        if z == x or x.kind == "W":
            return False
        return position(z) >= position(x) if z.kind == "W" else position(z) > position(x)

    jobs = []
    for c in classes:
        later = [z.head + z.duration for z in classes if descends(z.op, c.op)]
        tail = max(later) - (c.head + c.duration) if later else 0.0
        jobs.append((c.head - first, inst.microbatches * c.duration, max(0.0, tail)))
    return jobs


def memory_lanes(inst: Instance, d: int) -> list[tuple[OpId, int, float, float]]:
    """``(last op, lanes, length, after)`` for each memory-lane argument that applies on ``d``.

    Two per stage ``s``: microbatch ``i`` holds ``dF`` from ``F(s, i)``'s start to ``B(s, i)``'s end
    (length the round trip ``R``, and ``W`` still follows on the device), and, split, it holds
    ``min(dF, dF + dB)`` until ``W(s, i)`` ends (length ``R + W``). Empty when uncapped or when some
    stage of ``d`` can hold negative memory (then other microbatches could make room).
    """
    cap = inst.limit[d]
    stages = inst.stages_of_device[d]
    if not math.isfinite(cap) or not stages:
        return []
    df, db = inst.delta["F"], inst.delta["B"]
    if any(df[s] < 0 or df[s] + db[s] < 0 for s in stages):
        return []
    heads = {c.op: c.head for c in op_classes(inst)}

    def lanes(hold: float) -> int:
        return max(1, math.floor(cap_with_slack(cap / hold)))

    out = []
    for s in stages:
        trip = heads[OpId("B", s, 0)] + inst.duration["B"][s] - heads[OpId("F", s, 0)]
        w = inst.duration["W"][s] if inst.split_backward else 0.0
        if df[s] > 0:
            out.append((OpId("B", s, 0), lanes(df[s]), trip, w))
        hold = min(df[s], df[s] + db[s])
        if inst.split_backward and hold > 0:
            out.append((OpId("W", s, 0), lanes(hold), trip + w, 0.0))
    return out


def _lane_span(inst: Instance, d: int) -> float:
    m = inst.microbatches
    return max((math.ceil(m / k) * trip + w for _, k, trip, w in memory_lanes(inst, d)), default=0.0)


def device_span_bounds(inst: Instance) -> list[float]:
    """A lower bound on each device's span (last end − first start), see the module docstring.

    At least the device's work, and (implied by the subset bound, kept for clarity) the round
    trip of the microbatch it starts with.
    """
    work = inst.device_work()
    ranks = rank_span_bounds(inst)
    return [
        max(subset_bound(_relative_jobs(inst, classes)), work[d], _lane_span(inst, d), ranks[d]) if classes else 0.0
        for d, classes in enumerate(_device_classes(inst))
    ]


def makespan_lower_bound(inst: Instance) -> float:
    """Per-device subset and rank bounds with absolute heads/tails, first start + span, memory lanes;
    held Ws and the V's turn relay (:mod:`.held_w`, :mod:`.turn_relay`)."""
    best = max(head_work_tail_bound(inst), rank_makespan_bound(inst), held_w_bound(inst), turn_relay_bound(inst))
    spans = device_span_bounds(inst)
    by_op = {c.op: c for c in op_classes(inst)}
    for d in range(inst.devices):  # lanes start no earlier than F's head; the last op's tail follows
        for last, k, length, _ in memory_lanes(inst, d):
            lanes = math.ceil(inst.microbatches / k) * length
            best = max(best, by_op[OpId("F", last.stage, 0)].head + lanes + by_op[last].tail)
    for classes, span in zip(_device_classes(inst), spans, strict=True):
        if not classes:
            continue
        jobs = [(c.head, inst.microbatches * c.duration, c.tail) for c in classes]
        best = max(best, subset_bound(jobs), min(c.head for c in classes) + span)
    return best


def stage_span_lower_bound(inst: Instance) -> float:
    """The largest per-device span bound, and the V's turn relay (:mod:`.turn_relay`)."""
    return max(max(device_span_bounds(inst), default=0.0), turn_relay_bound(inst))


def lower_bound(inst: Instance) -> float:
    """The analytic bound for the problem's own objective (never above a true optimum); under the
    dual placement the best of its copies' bounds (:mod:`.dual`)."""
    if inst.overlap is not None:  # F&B pairs shorten devices' work: bound the pair-free relaxation
        return lower_bound(inst.without_overlap())
    if inst.dual:
        return dual_bound(inst, lower_bound)
    if inst.objective == "stage_span":
        return stage_span_lower_bound(inst)
    return makespan_lower_bound(inst)


# ------------------------------------------------------------------ the first, simpler bounds
# Head + work + tail per device and one microbatch's round trip: cheap, and still one term of
# makespan_lower_bound beside the per-microbatch-rank bound.


def forward_arrival(inst: Instance) -> list[float]:
    """Earliest start of F(s, i) for any i: the forward chain of stages before s, with comm."""
    out = [0.0]
    for s in range(1, inst.num_stages):
        out.append(out[-1] + inst.duration["F"][s - 1] + inst.link(s - 1, s))
    return out


def backward_drain(inst: Instance) -> list[float]:
    """Least time after B(s, i) ends until B(0, i) ends: the backward chain below s, with comm."""
    out = [0.0] * inst.num_stages
    for s in range(1, inst.num_stages):
        out[s] = out[s - 1] + inst.duration["B"][s - 1] + inst.link(s, s - 1)
    return out


def round_trip(inst: Instance, stage: int) -> float:
    """Least time from F(stage, i) starting to the last backward op of (stage, i) ending."""
    last = inst.num_stages - 1
    t = 0.0
    for s in range(stage, last + 1):
        t += inst.duration["F"][s] + inst.duration["B"][s]
        if s < last:
            t += 2 * inst.link(s, s + 1)
    if inst.split_backward:
        t += inst.duration["W"][stage]
    return t


def head_work_tail_bound(inst: Instance) -> float:
    """Per device: earliest forward arrival + all its work + (fused backward) the drain below its
    lowest stage; and one microbatch's whole round trip. Cheap, and part of the makespan bound."""
    arrive = forward_arrival(inst)
    drain = backward_drain(inst)
    work = inst.device_work()
    best = round_trip(inst, 0)
    for d, stages in enumerate(inst.stages_of_device):
        if stages:
            tail = 0.0 if inst.split_backward else drain[min(stages)]
            best = max(best, min(arrive[s] for s in stages) + work[d] + tail)
    return best

"""A bound for devices holding several stages under one memory cap (interleaved and V placements).

The round-trip bound (:func:`~pipesched.solver.bounds.combinatorial.round_trip_span_bound`) sees the
idle a cap forces at both ends of a device's window, but only with one stage per device. With ``v``
chunks per device the cap is shared by the activations of all of them, and the first memory a device
can give back is far away: device ``d``'s lowest stage ``s`` is the first of ``d``'s stages a
microbatch meets and its highest stage ``t`` the first one the microbatch's backward meets. Memory
shape, every stage of ``d``: ``F`` takes ``l1 > 0`` (held from its start), ``B`` gives some back and
``W`` the rest (``dB, dW <= 0``; each released at the op's end), every holding ``l1``, ``l2 = l1 + dB``,
``l3 = l2 + dW`` non-negative, so a microbatch never makes room for another. ``h(X)`` is the chain
head of class ``X`` (:func:`~pipesched.solver.bounds.analytic.op_classes`: the earliest start of
``X`` along one microbatch's chain, comm included), so a microbatch's ``Y`` starts at least
``h(Y) - h(X)`` after its ``X`` when ``Y`` descends from ``X``. ``t0`` is the device's first start,
``T`` its last end, ``C`` the cap (with the validator's slack).

**Head.** Every op of ``d`` of microbatch ``j`` descends from ``F(s, j)``, which starts ``>= t0``,
and every ``B`` or ``W`` of ``d`` from ``B(t, j)``. So no ``B`` or ``W`` starts on ``d`` before
``t0 + G``, ``G = h(B(t)) - h(F(s))``: in ``[t0, t0 + G)`` only forwards run and nothing is given
back, so the forwards started there hold together at most ``C``. A forward of stage ``r`` starts
``>= t0 + a_r``, ``a_r = h(F(r)) - h(F(s))``, so it is busy inside the window at most
``min(F_r, G - a_r)``. Busy ``<=`` the most a set of forwards of total ``l1`` at most ``C`` can be
worth, at most ``m`` per stage: no more than the fractional knapsack, nor than ``floor(C / min l1)``
times the largest single worth. Idle ``>= G - busy``.

**Tail, after the last B of the highest stage.** Let ``u`` be the end of the last ``B(t, z)`` to end on
``d``. Every ``F`` of ``d`` and every ``B(t, .)`` precedes some ``B(t, j)``, so it is done by ``u``; what
runs after ``u`` is ``B(r, .)`` for ``r < t`` (each still holding ``l1_r``: its ``B`` has not ended) and
pending ``W(r, .)`` (holding at least ``l2_r``). Memory never exceeds ``C`` (it rises only at the checked
starts of forwards), so at ``u`` those holdings sum to ``<= C``; ``z`` itself holds ``l1_r`` on each
``r < t`` and ``l2_t`` for ``W(t, z)``. The work left is then at most a fractional knapsack of items
(``B_r + W_r``, weight ``l1_r``) and (``W_r``, weight ``l2_r``) with ``z``'s own forced in, while
``T - u >= max h(X) + X - (h(B(t)) + B_t)`` over ``z``'s ops ``X`` on ``d`` after ``B(t, z)``. ``u >= t0 + G``,
so this window does not meet the head's.

**Tail, after the last forward.** Let ``F(r, z)`` be the last forward on ``d`` to start, at ``t_F``.
When it starts, every other forward of ``d`` has started and the level (checked there, ``<= C``) counts
``l1`` for each (microbatch, stage) whose ``B`` comes later on ``d``, ``z`` at ``r`` included, and ``l2``
for each with only its ``W`` later. Everything ``d`` runs from ``t_F`` on is ``F(r, z)`` and those ``B``
and ``W``: busy ``<= F_r +`` the same kind of knapsack with ``z``'s ``B + W`` forced in on every stage ``r' <= r``
of ``d`` (``F(r', z)`` has started, and ``B(r', z)`` descends from ``F(r, z)``), while
``T - t_F >= max h(X) + X - h(F(r))`` over ``B``/``W`` classes ``X`` of ``d``. ``r`` is unknown: the
least idle over ``r``. This window starts at or after ``t0 + G`` when all ``m`` forwards of every stage
of ``d`` need more than ``C`` together (one must wait for memory given back, after ``t0 + G``).

So ``T - t0 >= work(d) + head idle + the larger tail idle`` when the last-forward window misses the
head's, else ``work(d) + max(head + last-B tail, last-F tail)``: a stage-span bound; with ``t0 >= h(F(s))``
(the forward arrival) a makespan bound. With one stage per device it is the round-trip bound's
argument. ``tests/solver/test_shared_cap_bound.py`` checks it against brute force.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core.instance import Instance, OpId
from ..core.tolerance import cap_with_slack
from .chain import OpClass, op_classes


@dataclass(frozen=True)
class _Item:
    """``count`` (microbatch, stage) holdings, each worth ``work`` of ops and weighing ``hold`` memory."""

    work: float
    hold: float
    count: int


def _knapsack(items: list[_Item], room: float) -> float:
    """Upper bound on the work of holdings fitting in ``room``: the fractional knapsack (a relaxation)."""
    total = 0.0
    free = [it for it in items if it.hold <= 0]
    total += sum(it.work * it.count for it in free)
    paid = sorted((it for it in items if it.hold > 0), key=lambda it: -it.work / it.hold)
    for it in paid:
        if room <= 0:
            break
        n = min(float(it.count), room / it.hold)
        total += n * it.work
        room -= n * it.hold
    return total


@dataclass(frozen=True)
class _Device:
    """What the bound reads of one device: its stages low to high, holdings and the cap with slack."""

    stages: list[int]
    l1: dict[int, float]
    l2: dict[int, float]
    cap: float


def _device(inst: Instance, d: int) -> _Device | None:
    """None unless every stage of ``d`` has the natural memory shape (module docstring) and the cap is finite."""
    stages = sorted(inst.stages_of_device[d])
    cap = inst.limit[d]
    if not stages or not math.isfinite(cap):
        return None
    split = inst.split_backward
    l1, l2 = {}, {}
    for r in stages:
        df, db = inst.delta["F"][r], inst.delta["B"][r]
        dw = inst.delta["W"][r] if split else 0.0
        after_b, after_w = df + db, df + db + dw
        tol = 1e-9 * abs(df)
        if df <= 0 or db > 0 or dw > 0 or after_b < -tol or after_w < -tol:
            return None
        l1[r], l2[r] = df, max(0.0, after_b) if split else 0.0
    return _Device(stages, l1, l2, cap_with_slack(cap))


def _head_idle(inst: Instance, dev: _Device, cls: dict[OpId, OpClass]) -> tuple[float, float]:
    """(least idle in ``[t0, t0 + G)``, ``G``): see the module docstring."""
    s, t, m = dev.stages[0], dev.stages[-1], inst.microbatches
    base = cls[OpId("F", s, 0)].head
    window = cls[OpId("B", t, 0)].head - base
    worth = {r: min(inst.duration["F"][r], max(0.0, window - (cls[OpId("F", r, 0)].head - base))) for r in dev.stages}
    frac = _knapsack([_Item(worth[r], dev.l1[r], m) for r in dev.stages], dev.cap)
    most = math.floor(dev.cap / min(dev.l1.values())) * max(worth.values())
    return max(0.0, window - min(window, frac, most)), window


def _pending(inst: Instance, dev: _Device, b_left: list[int], w_left: list[int]) -> list[_Item]:
    """Knapsack items: a holding whose B is still to run (B + W of work, ``l1``) or only its W (``l2``)."""
    m = inst.microbatches
    w = inst.duration["W"] if inst.split_backward else None
    items = [_Item(inst.duration["B"][r] + (w[r] if w else 0.0), dev.l1[r], m) for r in b_left]
    if w:
        items += [_Item(w[r], dev.l2[r], m) for r in w_left]
    return items


def _forced(items: list[_Item], room: float, forced: list[_Item]) -> float:
    """Knapsack with one of each ``forced`` item taken first (and one fewer of it left)."""
    work = sum(f.work for f in forced)
    room -= sum(f.hold for f in forced)
    if room < 0:
        return math.inf  # the forced holdings alone exceed the cap: impossible, so no idle claimed
    rest = []
    for it in items:
        taken = sum(1 for f in forced if f is it)
        rest.append(_Item(it.work, it.hold, it.count - taken))
    return work + _knapsack(rest, room)


def _last_end(inst: Instance, d: int, cls: dict[OpId, OpClass], after: OpId) -> float:
    """Latest chain end of a B or W class of ``d`` descending from ``after`` (a B of ``d``'s highest
    stage or any F of ``d``: every B and W of ``d`` descends from both but B(t) itself)."""
    ends = [c.head + c.duration for op, c in cls.items()
            if op.kind != "F" and inst.device(op) == d and op != after]
    return max(ends)


def _tail_after_last_b(inst: Instance, dev: _Device, cls: dict[OpId, OpClass]) -> float:
    """Least idle between the end of the last ``B`` of ``d``'s highest stage and ``d``'s last end."""
    t = dev.stages[-1]
    top = OpId("B", t, 0)
    lower = dev.stages[:-1]
    ends = [cls[OpId("B", r, 0)].head + cls[OpId("B", r, 0)].duration for r in lower]
    if inst.split_backward:
        ends += [cls[OpId("W", r, 0)].head + cls[OpId("W", r, 0)].duration for r in dev.stages]
    if not ends:
        return 0.0
    need = max(ends) - (cls[top].head + cls[top].duration)
    items = _pending(inst, dev, lower, dev.stages)
    forced = items[:len(lower)]  # z's B on every lower stage
    if inst.split_backward:
        forced.append(items[-1])  # W(t, z): the W items follow the B items, stages low to high
    return max(0.0, need - _forced(items, dev.cap, forced))


def _tail_after_last_f(inst: Instance, d: int, dev: _Device, cls: dict[OpId, OpClass]) -> float:
    """Least idle between the last forward's start on ``d`` and ``d``'s last end, over its stage ``r``."""
    items = _pending(inst, dev, dev.stages, dev.stages)
    least = math.inf
    for k, r in enumerate(dev.stages):
        first = OpId("F", r, 0)
        need = _last_end(inst, d, cls, first) - cls[first].head
        # z holds l1 on every stage of d up to r: its B there descends from F(r, z)
        busy = inst.duration["F"][r] + _forced(items, dev.cap, items[:k + 1])
        least = min(least, max(0.0, need - busy))
    return least


def shared_cap_spans(inst: Instance) -> list[float]:
    """Per device: work + head idle + tail idle, a lower bound on its span (its work when the memory
    shape or an infinite cap rules the argument out)."""
    work = inst.device_work()
    if inst.dual:
        return [0.0] * inst.devices
    cls = {c.op: c for c in op_classes(inst)}
    out = []
    for d in range(inst.devices):
        dev = _device(inst, d)
        if dev is None:
            out.append(work[d])
            continue
        head, _ = _head_idle(inst, dev, cls)
        tail = _tail_after_last_b(inst, dev, cls)  # its window always misses the head's
        last_f = _tail_after_last_f(inst, d, dev, cls)
        forwards = inst.microbatches * sum(dev.l1.values())
        idle = head + max(tail, last_f) if forwards > dev.cap else max(head + tail, last_f)
        out.append(work[d] + idle)
    return out


def shared_cap_bound(inst: Instance) -> float:
    """The bound for the problem's objective: the largest device span, plus (makespan) the earliest the
    device's window can open, the forward arrival at its lowest stage."""
    spans = shared_cap_spans(inst)
    if inst.objective == "stage_span" or inst.dual:
        return max(spans, default=0.0)
    cls = {c.op: c for c in op_classes(inst)}
    return max((cls[OpId("F", min(st), 0)].head + span
                for st, span in zip(inst.stages_of_device, spans, strict=True) if st), default=0.0)

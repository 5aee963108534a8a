"""The list schedulers' one engine: each device, when it frees, starts the op its policy picks.

A list schedule moves time forward over all devices at once: the device whose next decision comes
first decides next, so every op that could have arrived by then is known. A policy supplies two
functions, and everything else is here, once:

* ``choose(d)``: (when device ``d`` can start its next op, the op), or (when to look again, None), or
  (inf, None) when nothing will be ready without another device's progress;
* ``commit(d, start, op)``: record ``op`` started on ``d`` at ``start``; (its end, the devices whose
  choice it may change, ``d`` among them).

A device's pending decision is invalidated by a version number whenever an op on it or on a
neighbour may change what it can start, so the heap never holds stale choices. With ``keep`` a
decision is kept from the moment it is pushed until it runs (valid when every change a choice reads
pushes the device again), so each op is decided once rather than twice: the zero-bubble grid's hot
loop. :func:`run_planned` is the other timing rule, planned wakes: a device decides only at the one
time it planned to look, which events only bring forward (method ``greedy``, :mod:`.greedy_rules`).

:class:`Progress` is the state most policies share (each stage's next F, B and W, when each F and B
ended, live memory, the banker's bookkeeping, each device's waiting Ws) with the one commit step, and
:func:`list_choose` the decision most of them share: admission, then priority, then W deferral
(:mod:`.rules` holds the rules themselves).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ...core.instance import Instance, OpId
from ...core.schedule import Order
from ...core.tolerance import EVENT_TOL
from .memory import BankersMemory

Choose = Callable[[int], tuple[float, Any]]
Commit = Callable[[int, float, Any], tuple[float, Iterable[int]]]


def run(devices: int, free: list[float], choose: Choose, commit: Commit, keep: bool = False) -> int:
    """Run the devices' events in time order until none is left; the number of ops started.
    ``free[d]`` (when device ``d`` is next free) is read by ``choose`` and kept here."""
    heap: list[tuple[float, int, int]] = []
    version = [0] * devices
    decided: list[tuple[float, Any] | None] = [None] * devices
    inf = math.inf

    def push(d: int) -> None:
        version[d] += 1
        choice = choose(d)
        if keep:
            decided[d] = choice if choice[1] is not None else None
        if choice[0] < inf:
            heapq.heappush(heap, (max(choice[0], free[d]), d, version[d]))

    for d in range(devices):
        push(d)
    done = 0
    while heap:
        when, d, ver = heapq.heappop(heap)
        if ver != version[d]:
            continue
        choice = decided[d] if keep else None
        if choice is None:
            free[d] = max(free[d], when)
            choice = choose(d)
            if choice[1] is None:
                if choice[0] < inf:
                    heapq.heappush(heap, (max(choice[0], free[d]), d, version[d]))
                continue
        free[d], touched = commit(d, choice[0], choice[1])
        done += 1
        for e in touched:
            push(e)
    return done


Look = Callable[[int, float], tuple[float, Any]]
Start = Callable[[int, float, Any], Iterable[tuple[int, float]]]


def run_planned(devices: int, look: Look, start: Start, wakes: Iterable[tuple[int, float]]) -> int:
    """The engine with planned wake times; the number of ops started.

    Each device keeps one planned time at which it next looks for work, and events only ever bring it
    forward: a policy whose choice at a wake depends on what has arrived by then (not by the time it
    was planned) needs this, because re-deciding at every neighbour's commit, as :func:`run` does, sees
    arrivals earlier. ``look(d, t)``: (start, op), or (when to look again, None), inf for never;
    ``start(d, at, op)``: record it, and the (device, time) wakes it plans (its own device's next look
    among them). ``wakes``: the first looks."""
    inf = math.inf
    planned = [inf] * devices
    heap: list[tuple[float, int]] = []

    def wake(d: int, when: float) -> None:
        if when < planned[d]:
            planned[d] = when
            heapq.heappush(heap, (when, d))

    for d, when in wakes:
        wake(d, when)
    done = 0
    while heap:
        t, d = heapq.heappop(heap)
        if t != planned[d]:
            continue  # brought forward since: stale
        planned[d] = inf
        at, op = look(d, t)
        if op is None:
            if at < inf:
                wake(d, at)
            continue
        for e, when in start(d, at, op):
            wake(e, when)
        done += 1
    return done


class Progress:
    """Each stage's next F, B and W (microbatch order), when each F and B ended, each device's live
    memory (and, under a finite cap with ``bank``, the banker's bookkeeping), its F and B counts, the
    kind of its last F or B, its order, and with ``fifo`` its waiting Ws in the order their Bs ran."""

    def __init__(self, inst: Instance, bank: bool = True, fifo: bool = False) -> None:
        p, m, S = inst.devices, inst.microbatches, inst.num_stages
        self.inst, self.m, self.S = inst, m, S
        self.nf, self.nb, self.nw = [0] * S, [0] * S, [0] * S
        self.f_end = [[math.nan] * m for _ in range(S)]
        self.b_end = [[math.nan] * m for _ in range(S)]
        self.free = [0.0] * p
        self.live = [0.0] * p
        self.fs, self.bs = [0] * p, [0] * p
        self.last = ["B"] * p
        self.order: Order = [[] for _ in range(p)]
        self.mem = BankersMemory(inst) if bank and any(math.isfinite(x) for x in inst.limit) else None
        self.ws: list[deque[OpId]] | None = [deque() for _ in range(p)] if fifo else None
        self.split = inst.split_backward
        self.up = [inst.link(s - 1, s) if s > 0 else 0.0 for s in range(S)]
        self.down = [inst.link(s + 1, s) if s < S - 1 else 0.0 for s in range(S)]

    def arrival(self, kind: str, s: int) -> float | None:
        """When the next op of ``kind`` on stage ``s`` has its input; None if not yet known or none left."""
        if kind == "F":
            i = self.nf[s]
            if i >= self.m:
                return None
            if s == 0:
                return 0.0
            e = self.f_end[s - 1][i]
            return None if e != e else e + self.up[s]  # NaN: not yet known
        i = self.nb[s]
        if i >= self.m:
            return None
        e = self.f_end[s][i] if s == self.S - 1 else self.b_end[s + 1][i]
        return None if e != e else e + self.down[s]

    def next_op(self, kind: str, s: int) -> OpId:
        return OpId(kind, s, (self.nf if kind == "F" else self.nb)[s])  # type: ignore[arg-type]

    def commit(self, d: int, at: float, op: OpId) -> tuple[float, set[int]]:
        """The one commit step: counters, ends, memory, order, waiting Ws; (end, devices to re-decide)."""
        inst = self.inst
        k, st, i = op
        end = at + inst.cost(op)
        change = inst.mem(op)
        self.live[d] += change
        if self.mem is not None:
            if k == "F" and st == 0:
                self.mem.admit(i)
            self.mem.apply(d, i, change)
        self.order[d].append(op)
        touched = {d}
        if k == "F":
            self.nf[st] += 1
            self.fs[d] += 1
            self.last[d] = "F"
            self.f_end[st][i] = end
            if st < self.S - 1:
                touched.add(inst.device_of_stage[st + 1])
        elif k == "B":
            self.nb[st] += 1
            self.bs[d] += 1
            self.last[d] = "B"
            self.b_end[st][i] = end
            if self.ws is not None and self.split:
                self.ws[d].append(OpId("W", st, i))
            if st > 0:
                touched.add(inst.device_of_stage[st - 1])
        else:
            self.nw[st] += 1
            if self.ws is not None:
                self.ws[d].popleft()
        return end, touched


def w_due(rule: str, blocked: bool, now: float, nxt: float, length: float) -> bool:
    """The W-deferral rule: a waiting W runs when memory stops a ready forward (``blocked``), always
    (``eager``), or (``fits``) when it ends before the next known arrival ``nxt``."""
    return blocked or rule == "eager" or nxt - now >= length - EVENT_TOL


def list_choose(prog: Progress, slots: Callable[[int], Sequence[tuple[str, int]]],
                admits: Callable[[int, str, int], bool], allows: Callable[[int, OpId], bool],
                pick: Callable[[int, list[OpId]], OpId] | None, waiting: Callable[[int], Sequence[OpId]],
                w_rule: str, hold: int | None) -> Choose:
    """The shared decision: with ``hold``, a W first when more than ``hold`` wait; else of device ``d``'s
    ``slots`` (kind, stage) whose next op has its input now, ``admits`` (in-flight counts, a recipe's
    sequence) and ``allows`` (memory) decide which may start and ``pick`` (priority; None: the slots are
    in priority order, the first that may start does) which does; else the first of ``waiting`` when
    :func:`w_due`; else look again at the next known arrival."""
    free, dur_w = prog.free, prog.inst.duration.get("W")
    arrival, next_op, tol, inf = prog.arrival, prog.next_op, EVENT_TOL, math.inf

    def choose(d: int) -> tuple[float, OpId | None]:
        now = free[d]
        ws = waiting(d)
        if ws and hold is not None and len(ws) > hold:
            return now, ws[0]
        later = inf
        runnable: list[OpId] = []
        blocked = False
        for kind, s in slots(d):
            r = arrival(kind, s)
            if r is None or not admits(d, kind, s):
                continue
            if r > now + tol:
                if r < later:
                    later = r
                continue
            op = next_op(kind, s)
            if allows(d, op):
                if pick is None:
                    return now, op
                runnable.append(op)
            elif kind == "F":
                blocked = True
        if runnable:
            return now, pick(d, runnable)  # type: ignore[misc]
        if ws and dur_w is not None and w_due(w_rule, blocked, now, later, dur_w[ws[0].stage]):
            return now, ws[0]
        return later, None

    return choose

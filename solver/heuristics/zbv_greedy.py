"""The ZB-V generator of the zero-bubble authors (Qi et al., "Pipeline Parallelism with Controllable
Memory", NeurIPS 2024; their public ZB-V schedule generator), as a candidate for ``auto``.

V placement: device ``d`` holds stages ``d`` and ``2p - 1 - d``. A pass is named by its *direction*:
``0`` moves from device 0 towards ``p - 1`` (F of stage ``d``, B and W of stage ``2p - 1 - d``), ``1``
back (F of stage ``2p - 1 - d``, B and W of stage ``d``). All devices advance together:

1. warm-up: a direction-0 F everywhere; from the last device up, each device (with every device above
   it, so the V stays fed) adds direction-0 Fs while they end before its first direction-1 F can
   arrive and memory keeps room for ``2 + 2d`` more Fs; then that direction-1 F;
2. fill: from device 1 down, each device catches up on Fs (directions alternating, the devices below it
   too) until it has run as many as the device above and more direction-1 Fs than it;
3. ``2m`` rounds: Ws while a B would not fit; on each device one B, direction 1 when its input is there
   (devices last first), else direction 0; then one F per device, direction 1 when its input is there,
   else direction 0 while microbatches remain. Before a pass fed by a neighbour: Ws that end before the
   input arrives, and one more W when the wait would exceed the bubble the device may still take (the
   largest bubble so far, or its allowance, minus its own): always before a direction-1 B, before a
   direction-0 B under ``fill_b``, before an F under ``fill_f``;
4. the Ws left.

A run is repeated with its devices' bubbles as their allowances while the largest bubble falls; the
four (``fill_b``, ``fill_f``) settings each give such a chain, on two views of the costs: each stage's
own, and one per pass (:func:`median_view`: each device's mean over its two stages, the median over
devices, as the authors' runtime hands the generator; with uneven per-stage costs a run can get stuck
on a forward whose input is not placed yet, which the uniform view avoids). Every order is a
candidate, timed by our simulator on the real costs, with each stage's deltas and each device's cap.
``auto`` runs a reduced set above ``FULL_MODEL_OPS`` (:attr:`~pipesched.solver.budget.PerOpCosts.zbv_large` says which and why).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections import deque

from ..budget import PER_OP
from ..core.instance import Instance, OpId
from ..core.method import Method
from ..core.problem import Problem
from ..core.schedule import Order
from ..core.tolerance import within_cap
from ..timing.finalize import best_candidate_solver
from ..timing.retime import Incumbent
from .zb_auto import best_orders

#: Most runs of one chain (the bubble re-runs stop earlier in practice: a handful).
MAX_RERUNS = 16
KINDS = "FBW"

Key = tuple[int, int, int, int]  # (kind index 0/1/2, direction, device, microbatch)


class _Stuck(Exception):
    """The run cannot go on (memory with no W left, a pass whose input is not placed)."""


class _V:
    def __init__(self, inst: Instance, fill_f: bool, fill_b: bool, allowed: list[float] | None) -> None:
        self.inst, self.p, self.m = inst, inst.devices, inst.microbatches
        self.fill_f, self.fill_b = fill_f, fill_b
        self.allowed = allowed or [-1.0] * self.p
        self.top_allowed = max(self.allowed)
        self.n = [[0] * 6 for _ in range(self.p)]  # per device, kind * 2 + direction
        self.finish: dict[Key, float] = {}
        self.clock = [0.0] * self.p
        self.level = [0.0] * self.p
        self.bubble = [0.0] * self.p
        self.waiting: list[deque[int]] = [deque() for _ in range(self.p)]  # directions of Bs without their W
        self.order: Order = [[] for _ in range(self.p)]

    def stage(self, k: int, direction: int, d: int) -> int:
        return d if (k == 0) == (direction == 0) else 2 * self.p - 1 - d

    def dur(self, k: int, direction: int, d: int) -> float:
        return self.inst.duration[KINDS[k]][self.stage(k, direction, d)]

    def fits(self, k: int, direction: int, d: int, times: int = 1) -> bool:
        delta = self.inst.delta[KINDS[k]][self.stage(k, direction, d)]
        return within_cap(self.level[d] + times * delta, self.inst.limit[d])

    def ended(self, key: Key) -> bool:
        return key in self.finish

    def arrival(self, d: int, src: Key) -> float:
        """When pass ``src`` on a neighbouring device reaches device ``d`` (its end plus the latency of
        the model boundary between the two stages)."""
        k, direction, e, _ = src
        a, b = sorted((self.stage(k, direction, d), self.stage(k, direction, e)))
        return self.finish[src] + (self.inst.comms[a] if self.inst.comms else self.inst.comm)

    def affordable(self, d: int) -> float:
        return max(max(self.bubble), self.top_allowed - self.allowed[d]) - self.bubble[d]

    def put(self, k: int, direction: int, d: int) -> None:
        i = self.n[d][k * 2 + direction]
        if i >= self.m or not self.fits(k, direction, d):
            raise _Stuck
        if k < 2 and (k, direction) != (0, 0):
            before = k * 2 + direction - 1
            if not self.ended((before // 2, before % 2, d, i)):
                raise _Stuck
        if k == 2 and not self.ended((1, direction, d, i)):
            raise _Stuck
        own = self.dur(k, direction, d)
        end = idle_end = self.clock[d] + own
        src = d + 1 if direction == 1 else d - 1
        if k < 2 and 0 <= src < self.p:
            if not self.ended((k, direction, src, i)):
                raise _Stuck
            end = max(end, self.arrival(d, (k, direction, src, i)) + own)
        if self.n[d][0]:
            self.bubble[d] += end - idle_end
        self.finish[k, direction, d, i] = self.clock[d] = end
        self.level[d] += self.inst.delta[KINDS[k]][self.stage(k, direction, d)]
        self.order[d].append(OpId(KINDS[k], self.stage(k, direction, d), i))  # type: ignore[arg-type]
        if k == 1:
            self.waiting[d].append(direction)
        self.n[d][k * 2 + direction] += 1

    def put_w(self, d: int) -> None:
        if not self.waiting[d]:
            raise _Stuck
        self.put(2, self.waiting[d].popleft(), d)

    def before(self, d: int, src: Key | None, fill: bool) -> None:
        """Ws that end before ``src`` arrives, then one more when the wait is more than affordable."""
        if src is None:
            return
        due = self.arrival(d, src)
        while self.waiting[d] and due >= self.clock[d] + self.dur(2, self.waiting[d][0], d):
            self.put_w(d)
        if fill and self.waiting[d] and due - self.clock[d] > self.affordable(d):
            self.put_w(d)


def _warm_up(v: _V) -> None:
    p, m = v.p, v.m
    for d in range(p):
        v.put(0, 0, d)
    for d in range(p - 1, -1, -1):
        if d < p - 1:
            due = v.arrival(d, (0, 1, d + 1, 0))
            while v.fits(0, 0, d, 2 + 2 * d) and v.clock[d] + v.dur(0, 0, d) <= due and v.n[d][0] < m:
                for e in range(d + 1):
                    v.put(0, 0, e)
        v.put(0, 1, d)
    direction, idle = 0, 0
    for d in range(1, p):
        while v.n[d][0] + v.n[d][1] < v.n[d - 1][0] + v.n[d - 1][1] or v.n[d][1] <= v.n[d - 1][1] < m:
            placed = False
            for e in range(p - 1, d - 1, -1):
                if v.n[e][direction] < m:
                    v.put(0, direction, e)
                    placed = True
            direction = 1 - direction
            idle = 0 if placed else idle + 1
            if idle > 2:
                raise _Stuck


def _backward_round(v: _V) -> None:
    p, m = v.p, v.m
    for d in range(p):
        while not (v.fits(1, 0, d) and v.fits(1, 1, d)):
            v.put_w(d)
    up = [d for d in range(p) if v.n[d][3] < v.n[d][2]
          and (d == p - 1 or v.ended((1, 1, d + 1, v.n[d][3])) or v.n[d][2] >= m)]
    down = [d for d in range(p) if d not in up]
    for d, direction in [(d, 1) for d in reversed(up)] + [(d, 0) for d in down]:
        src: Key | None = None
        if direction == 1 and d < p - 1:
            src = (1, 1, d + 1, v.n[d][3])
        elif direction == 0 and d > 0:
            src = (1, 0, d - 1, v.n[d][2])
        if src is not None and not v.ended(src):
            raise _Stuck
        v.before(d, src, direction == 1 or v.fill_b)
        v.put(1, direction, d)


def _forward_round(v: _V) -> None:
    p, m = v.p, v.m
    for d in range(p):
        if v.n[d][1] >= m:
            continue
        if v.n[d][1] >= v.n[d][0]:
            direction = 0
        elif d == p - 1 or v.ended((0, 1, d + 1, v.n[d][1])):
            direction = 1
        elif v.n[d][0] < m and (d == 0 or v.ended((0, 0, d - 1, v.n[d][0]))):
            direction = 0
        else:
            continue
        while not v.fits(0, direction, d):
            v.put_w(d)
        src: Key | None = None
        if direction == 0 and d > 0:
            src = (0, 0, d - 1, v.n[d][0])
        elif direction == 1 and d < p - 1:
            src = (0, 1, d + 1, v.n[d][1])
        if src is not None and not v.ended(src):
            raise _Stuck
        v.before(d, src, v.fill_f)
        v.put(0, direction, d)


def _run(inst: Instance, fill_f: bool, fill_b: bool, allowed: list[float] | None) -> _V:
    v = _V(inst, fill_f, fill_b, allowed)
    _warm_up(v)
    for _ in range(2 * v.m):
        _backward_round(v)
        _forward_round(v)
    for d in range(v.p):
        while v.waiting[d]:
            v.put_w(d)
    return v


def median_view(inst: Instance) -> Instance:
    """``inst`` with one cost per pass (module docstring); the orders are still timed on ``inst``."""
    p, stages = inst.devices, inst.num_stages
    duration = {}
    for k, x in inst.duration.items():
        means = sorted((x[d] + x[stages - 1 - d]) / 2 for d in range(p))
        duration[k] = (means[p // 2],) * stages
    return dataclasses.replace(inst, duration=duration)


def zbv_orders(inst: Instance, full: bool = True) -> list[Order]:
    """Every order of the chains of runs (module docstring), in the order built: all four fill settings on
    both cost views, or (``full=False``, :data:`LARGE_SET`) the median view with ``fill_f`` only."""
    out: list[Order] = []
    views = (inst, median_view(inst)) if full else (median_view(inst),)
    fills = list(itertools.product((True, False), repeat=2)) if full else [(True, True), (False, True)]
    for view, (fill_b, fill_f) in itertools.product(views, fills):
        allowed: list[float] | None = None
        best = math.inf
        for _ in range(MAX_RERUNS):
            try:
                v = _run(view, fill_f, fill_b, allowed)
            except _Stuck:
                break
            out.append(v.order)
            top = max(v.bubble)
            if allowed is not None and top >= best:
                break
            best, allowed = min(best, top), list(v.bubble)
    return out


def zbv_candidates(inst: Instance, keep: int = 2, full: bool = True) -> list[Incumbent]:
    """The ``keep`` best distinct orders of :func:`zbv_orders`."""
    if inst.placement != "v" or not inst.split_backward:
        return []
    return best_orders(inst, zbv_orders(inst, full), keep)


def _applies(problem: Problem) -> str | None:
    if problem.placement != "v":
        return f"zb-v-generator needs placement 'v' with stages_per_device = 2 (got {problem.placement!r})"
    if not problem.split_backward:
        return "zb-v-generator needs split_backward: true (it schedules B and W separately)"
    return None


solve_zbv_generator = best_candidate_solver("zb-v-generator", lambda inst: zbv_candidates(inst, keep=1), "zb-v-greedy or auto")


ZBV_GENERATOR = Method(
    "zb-v-generator",
    "The ZB-V authors' memory-aware V generator (warm-up sized by memory, W fills bubbles it can afford, "
    "bubble-balancing re-runs); respects memory.limit; needs placement 'v' and split_backward.",
    "search", solve_zbv_generator, requires=_applies, cost_per_op=PER_OP.zbv)

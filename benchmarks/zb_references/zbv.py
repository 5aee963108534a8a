"""The zero-bubble authors' ZB-V generator (Qi et al., "Pipeline Parallelism with Controllable Memory",
NeurIPS 2024), rewritten: a memory-aware greedy over the V placement.

Read from sail-sg/zero-bubble-pipeline-parallelism, ``megatron/core/pipeline_parallel/v_schedule.py``
at tag zero-bubble-v0.1.0 (``PipelineGraph.try_v_schedule`` and ``get_v_schedule``).

Device ``d`` holds model stages ``d`` and ``2p - 1 - d``. The generator names a pass by its *direction*:
direction 0 moves from device 0 towards device ``p - 1`` (the forward of stage ``d``, the backward of
stage ``2p - 1 - d``), direction 1 back (the forward of stage ``2p - 1 - d``, the backward of stage ``d``).
All devices advance together:

1. warm-up: one direction-0 F everywhere; then from the last device up, each device (and every device
   above it, so the V stays fed) adds direction-0 Fs while they end before the first direction-1 F
   arrives and memory keeps room for ``2 + 2d`` more Fs; then its first direction-1 F;
2. fill: from device 1 down, each device catches up on Fs (alternating directions, every device below
   it too) until it has run as many as the device above and more direction-1 Fs than it;
3. ``2m`` rounds: Ws while a B would not fit; on each device one B, direction 1 where its input is
   ready (devices last first), else direction 0; then one F per device, direction 1 where its input is
   ready, else direction 0 while microbatches remain. Before a pass whose input comes from a
   neighbour, Ws that end before it arrives, and one more W when the wait would exceed the bubble the
   device may still afford (always before a direction-1 B; before a direction-0 B under ``fill_b``,
   before an F under ``fill_f``);
4. the Ws left.

A run is repeated with its stages' bubbles as each stage's allowance while that lowers the largest
bubble; ``get_v_schedule`` tries ``fill_b`` x ``fill_f`` and keeps the least bubble. The reference
keeps every order this produces and the best under our timing, built on two cost views: each
stage's own costs, and one cost per pass as their runtime hands the generator (each device's mean
over its two stages, then the median over devices). Memory deltas and caps are read per stage and
device. With per-stage costs a run can get stuck where theirs asserts (a forward whose input is not
yet placed); on uniform costs it builds exactly their orders.
"""

from __future__ import annotations

import itertools
import math
from collections import deque

from pipesched.solver import Problem
from pipesched.solver.core.instance import OpId

from .common import Inputs, Timed, Unbuildable, best_of, order_of

NAME = "zb-v generator (authors)"
#: Re-runs with the stages' bubbles as allowances stop here at the latest (the authors' recursion
#: stops when the largest bubble stops falling, which in practice is after a few).
MAX_RERUNS = 32

Key = tuple[int, int, int, int]  # (pass 0/1/2 = F/B/W, direction, device, microbatch)


class _Run:
    """One pass of ``try_v_schedule``: per device the counts, clock, memory, bubble and pending Ws."""

    def __init__(self, x: Inputs, fill_f: bool, fill_b: bool, allowed: list[float] | None) -> None:
        self.x, self.p, self.m = x, x.devices, x.microbatches
        self.fill_f, self.fill_b = fill_f, fill_b
        self.allowed = allowed if allowed is not None else [-1.0] * self.p
        self.top_allowed = max(self.allowed)
        self.count = [[0] * 6 for _ in range(self.p)]
        self.done: dict[Key, float] = {}
        self.clock = [0.0] * self.p
        self.level = [0.0] * self.p
        self.bubble = [0.0] * self.p
        self.pending: list[deque[int]] = [deque() for _ in range(self.p)]
        self.ops: list[list[tuple[str, int, int]]] = [[] for _ in range(self.p)]

    def stage(self, cat: int, direction: int, d: int) -> int:
        forward_down = (cat == 0) == (direction == 0)
        return d if forward_down else 2 * self.p - 1 - d

    def cost(self, cat: int, direction: int, d: int) -> float:
        return self.x.cost["FBW"[cat]][self.stage(cat, direction, d)]

    def mem(self, cat: int, direction: int, d: int) -> float:
        return self.x.mem["FBW"[cat]][self.stage(cat, direction, d)]

    def end(self, key: Key) -> float:
        return self.done.get(key, -1.0)

    def affordable(self, d: int) -> float:
        """The bubble device ``d`` may still take: the largest so far (or its allowance) minus its own."""
        top = max(max(self.bubble), self.top_allowed - self.allowed[d])
        return top - self.bubble[d]

    def arrival(self, d: int, source: Key) -> float:
        """When ``source`` (a pass on a neighbouring device) reaches device ``d``: its end plus the latency
        of the model boundary between the two passes' stages."""
        cat, direction, src, _ = source
        return self.end(source) + self.x.comm(self.stage(cat, direction, d), self.stage(cat, direction, src))

    def put(self, cat: int, direction: int, d: int) -> None:
        n = self.count[d][cat * 2 + direction]
        if n >= self.m or not self.x.fits(self.level[d] + self.mem(cat, direction, d), d):
            raise Unbuildable(f"pass {cat} direction {direction} on device {d}")
        if cat < 2 and (cat, direction) != (0, 0):
            prev = cat * 2 + direction - 1
            if self.end((prev // 2, prev % 2, d, n)) < 0:
                raise Unbuildable("the pass before on the same device is not placed")
        if cat == 2 and self.end((1, direction, d, n)) < 0:
            raise Unbuildable("W before its B")
        own = self.cost(cat, direction, d)
        finish = self.clock[d] + own
        src = d + 1 if direction == 1 else d - 1
        if cat < 2 and 0 <= src < self.p:
            if self.end((cat, direction, src, n)) < 0:
                raise Unbuildable("input not placed")
            finish = max(finish, self.arrival(d, (cat, direction, src, n)) + own)
        if self.count[d][0] > 0:
            self.bubble[d] += finish - (self.clock[d] + own)
        self.done[cat, direction, d, n] = finish
        self.clock[d] = finish
        self.level[d] += self.mem(cat, direction, d)
        self.ops[d].append(("FBW"[cat], self.stage(cat, direction, d), n))
        if cat == 1:
            self.pending[d].append(direction)
        self.count[d][cat * 2 + direction] += 1

    def put_w(self, d: int) -> None:
        if not self.pending[d]:
            raise Unbuildable("no W to run")
        self.put(2, self.pending[d].popleft(), d)

    def w_cost(self, d: int) -> float:
        return self.cost(2, self.pending[d][0], d)

    def before_pass(self, d: int, source: Key | None, fill: bool) -> None:
        """Ws that end before the pass's input arrives, then one more if the wait is unaffordable."""
        if source is None:
            return
        arrival = self.arrival(d, source)
        while self.pending[d] and arrival >= self.clock[d] + self.w_cost(d):
            self.put_w(d)
        if self.pending[d] and arrival - self.clock[d] > self.affordable(d) and fill:
            self.put_w(d)


def _warm_up(r: _Run) -> None:
    p, m = r.p, r.m
    for d in range(p):
        r.put(0, 0, d)
    for d in range(p - 1, -1, -1):
        if d == p - 1:
            r.put(0, 1, d)
            continue
        arrival = r.arrival(d, (0, 1, d + 1, 0))
        while (r.x.fits(r.level[d] + r.mem(0, 0, d) * (2 + 2 * d), d)
               and r.clock[d] + r.cost(0, 0, d) <= arrival and r.count[d][0] < m):
            for e in range(d + 1):
                r.put(0, 0, e)
        r.put(0, 1, d)
    direction = 0
    for d in range(1, p):
        idle = 0
        while (r.count[d][0] + r.count[d][1] < r.count[d - 1][0] + r.count[d - 1][1]
               or r.count[d][1] <= r.count[d - 1][1] < m):
            placed = False
            for e in range(p - 1, d - 1, -1):
                if r.count[e][direction] < m:
                    r.put(0, direction, e)
                    placed = True
            direction = 1 - direction
            idle = 0 if placed else idle + 1
            if idle > 2:
                raise Unbuildable("fill phase made no progress")


def _backward_round(r: _Run) -> None:
    p, m = r.p, r.m
    for d in range(p):
        while not r.x.fits(r.level[d] + r.mem(1, 0, d), d) or not r.x.fits(r.level[d] + r.mem(1, 1, d), d):
            r.put_w(d)
    down, up = [], []
    for d in range(p):
        if r.count[d][3] >= r.count[d][2]:
            down.append(d)
        elif d == p - 1 or r.end((1, 1, d + 1, r.count[d][3])) >= 0 or r.count[d][2] >= m:
            up.append(d)
        else:
            down.append(d)
    for d, direction in [(d, 1) for d in reversed(up)] + [(d, 0) for d in down]:
        source: Key | None = None
        if direction == 1 and d < p - 1:
            source = (1, 1, d + 1, r.count[d][3])
        if direction == 0 and d > 0:
            source = (1, 0, d - 1, r.count[d][2])
        r.before_pass(d, source, direction == 1 or r.fill_b)
        r.put(1, direction, d)


def _forward_round(r: _Run) -> None:
    p, m = r.p, r.m
    for d in range(p):
        if r.count[d][1] >= m:
            continue
        direction: int | None = None
        if r.count[d][1] >= r.count[d][0]:
            direction = 0
        elif d == p - 1 or r.end((0, 1, d + 1, r.count[d][1])) >= 0:
            direction = 1
        elif r.count[d][0] < m and (d == 0 or r.end((0, 0, d - 1, r.count[d][0])) >= 0):
            direction = 0
        if direction is None:
            continue
        while not r.x.fits(r.level[d] + r.mem(0, direction, d), d):
            r.put_w(d)
        source: Key | None = None
        if direction == 0 and d > 0:
            source = (0, 0, d - 1, r.count[d][0])
        if direction == 1 and d < p - 1:
            source = (0, 1, d + 1, r.count[d][1])
        r.before_pass(d, source, r.fill_f)
        r.put(0, direction, d)


def try_v(x: Inputs, fill_f: bool, fill_b: bool, allowed: list[float] | None = None) -> _Run:
    """One run (raises :class:`Unbuildable` where the authors' code asserts)."""
    r = _Run(x, fill_f, fill_b, allowed)
    _warm_up(r)
    for _ in range(2 * r.m):
        _backward_round(r)
        _forward_round(r)
    for d in range(r.p):
        while r.pending[d]:
            r.put_w(d)
    return r


def _runs(x: Inputs, fill_f: bool, fill_b: bool) -> list[_Run]:
    """The first run and its re-runs with the stages' bubbles as allowances, while the largest bubble falls."""
    out: list[_Run] = []
    allowed: list[float] | None = None
    best = math.inf
    for _ in range(MAX_RERUNS):
        try:
            r = try_v(x, fill_f, fill_b, allowed)
        except Unbuildable:
            break
        out.append(r)
        top = max(r.bubble)
        if allowed is not None and top >= best:
            break
        best, allowed = min(best, top), list(r.bubble)
    return out


def applies(problem: Problem) -> bool:
    return problem.placement == "v" and problem.split_backward


def zbv_orders(problem: Problem) -> list[list[list[OpId]]]:
    """Every order the generator builds for a V-placement, split-backward problem."""
    if not applies(problem):
        return []
    x = Inputs.of(problem)
    return [order_of(r.ops) for view in (x, x.v_median_costs())
            for fb, ff in itertools.product((True, False), repeat=2) for r in _runs(view, ff, fb)]


def zbv(problem: Problem) -> Timed | None:
    """The generator's best order under our timing, within the cap (None when none builds)."""
    return best_of(problem, NAME, zbv_orders(problem))

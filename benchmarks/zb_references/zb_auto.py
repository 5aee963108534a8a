"""The zero-bubble authors' automatic ZB-1p / ZB-2p heuristic (Qi et al., ICLR 2024, section 3.1), rewritten.

Read from sail-sg/zero-bubble-pipeline-parallelism (``megatron/core/pipeline_parallel/auto_schedule.py``,
``Graph.manual_order`` and ``initial_solution``, tag zero-bubble-v0.1.0; the ILP there is switched off,
so the heuristic is what ZB-1p / ZB-2p run). Loop placement, one stage per device, split backward.

The construction, microbatch by microbatch, all devices advancing together:

- microbatch 0: one F on every stage; then, from the last stage up, each stage adds warm-up Fs while
  they fit its memory and end before the first B can arrive from below (variant ``allow_bubble``: while
  the next F would end by then, i.e. never leave the device idle waiting for that B); a stage never
  keeps as many extra Fs as the stage before it; the Fs go in, then the first B on every stage, last first.
- microbatch i > 0: each stage takes its next F unless (variant ``prioritize_b``) it is two Fs ahead of
  the stage below and taking it would delay that stage's next B by more than the bubble it may still
  afford (the largest bubble so far on any stage minus its own); a stage takes an F only if the stage
  below takes one too. Before each F and each B: Ws while memory needs room; Ws that end before the
  pass's input arrives; and one more W when the wait left would exceed the affordable bubble (or,
  variant ``no_bubble_greedy``, whenever a wait is left). Stage 0 drains its Ws before its last Bs.
- the Ws left run at the end.

``initial_solution`` runs the eight variants and keeps the shortest; :func:`zb_auto_orders` returns all
eight orders, built twice: on each stage's own costs (their ``GraphConfig`` takes lists) and on one
median cost per pass (what their runtime hands it), and the reference keeps the best under our timing.
"""

from __future__ import annotations

import itertools

from pipesched.solver import Problem
from pipesched.solver.core.instance import OpId

from .common import Inputs, Timed, Unbuildable, best_of, order_of

NAME = "zb-auto (authors)"


class _Build:
    """The state of one construction: per stage the counts, end time, memory and bubble so far."""

    def __init__(self, x: Inputs) -> None:
        self.x, self.p, self.m = x, x.devices, x.microbatches
        self.count = {k: [0] * self.p for k in "FBW"}
        self.end = [0.0] * self.p
        self.level = [0.0] * self.p
        self.bubble = [0.0] * self.p
        self.done: dict[tuple[str, int, int], float] = {}
        self.ops: list[list[tuple[str, int, int]]] = [[] for _ in range(self.p)]

    def cost(self, kind: str, j: int) -> float:
        return self.x.cost[kind][j]

    def mem(self, kind: str, j: int) -> float:
        return self.x.mem[kind][j]

    def ready(self, kind: str, j: int, i: int) -> float:
        """When pass ``kind`` of microbatch ``i`` may start on stage ``j`` given the neighbour's output
        (0 when it is not placed yet, as their table's zero default reads)."""
        if kind == "F" and j > 0:
            return self.done.get(("F", j - 1, i), 0.0) + self.x.comm(j - 1, j)
        if kind == "B" and j < self.p - 1:
            return self.done.get(("B", j + 1, i), 0.0) + self.x.comm(j, j + 1)
        return 0.0

    def max_bubble(self) -> float:
        return max(self.bubble)

    def put(self, j: int, kind: str) -> None:
        i = self.count[kind][j]
        if i >= self.m or not self.x.fits(self.level[j] + self.mem(kind, j), j):
            raise Unbuildable(f"{kind}{i} on stage {j}")
        finish = self.end[j] + self.cost(kind, j)
        if kind != "W":
            finish = max(finish, self.ready(kind, j, i) + self.cost(kind, j))
        if self.count["F"][j] > 0:
            self.bubble[j] += finish - (self.end[j] + self.cost(kind, j))
        self.end[j] = finish
        self.done[kind, j, i] = finish
        self.level[j] += self.mem(kind, j)
        self.count[kind][j] += 1
        self.ops[j].append((kind, j, i))

    def pending_w(self, j: int) -> bool:
        return self.count["W"][j] < self.count["B"][j]

    def free_for(self, j: int, kind: str) -> None:
        """Ws until the pass fits the cap."""
        while not self.x.fits(self.level[j] + self.mem(kind, j), j):
            if not self.pending_w(j):
                raise Unbuildable(f"no W left to free memory for {kind} on stage {j}")
            self.put(j, "W")

    def fill_wait(self, j: int, arrival: float, greedy: bool) -> None:
        """Ws that end before ``arrival``, then one more when the wait left is too long to afford
        (or, greedy, whenever some wait is left)."""
        while self.pending_w(j) and self.end[j] + self.cost("W", j) <= arrival:
            self.put(j, "W")
        wait = arrival - self.end[j]
        if self.pending_w(j) and wait > 0 and (wait > self.max_bubble() - self.bubble[j] or greedy):
            self.put(j, "W")


def _first_microbatch(b: _Build, allow_bubble: bool) -> None:
    p, x = b.p, b.x
    for j in range(p):
        b.put(j, "F")
    extra = [0] * p
    last = 0.0
    for j in range(p - 1, -1, -1):
        if j == p - 1:
            last = b.done["F", j, 0] + b.cost("B", j)
            continue
        level, t, comm = b.level[j], b.end[j], x.comm(j, j + 1)
        while b.count["F"][j] + extra[j] < b.m and x.fits(level + b.mem("F", j), j):
            if (t + b.cost("F", j) > last + comm) if allow_bubble else (t >= last + comm):
                break
            level += b.mem("F", j)
            t += b.cost("F", j)
            extra[j] += 1
        last = max(t, last + comm) + b.cost("B", j)
    for j in range(1, p):
        while extra[j] > 0 and extra[j] >= extra[j - 1] and b.count["F"][j] + extra[j] < b.m:
            extra[j] -= 1
    for j in range(p):
        for _ in range(extra[j]):
            b.put(j, "F")
    for j in range(p - 1, -1, -1):
        b.put(j, "B")


def _wants_f(b: _Build, j: int, prioritize_b: bool) -> bool:
    """Whether stage ``j`` takes its next F this round (module docstring)."""
    if b.count["F"][j] >= b.m:
        return False
    below = j + 1
    if not (prioritize_b and below < b.p and b.count["F"][j] >= b.count["F"][below] + 2):
        return True
    next_b = b.end[below] + b.cost("F", below) + b.cost("B", below) + b.x.comm(j, below)
    if b.end[j] >= next_b:
        return False
    w_cost, w_n, level = 0.0, 0, b.level[j] + b.mem("F", j)
    while not b.x.fits(level, j) and b.count["W"][j] + w_n < b.count["B"][j]:
        w_cost += b.cost("W", j)
        level += b.mem("W", j)
        w_n += 1
    if b.end[j] + b.cost("F", j) + w_cost <= next_b:
        return True
    return not next_b - b.end[j] <= b.max_bubble() - b.bubble[j]


def manual_order(x: Inputs, allow_bubble: bool, prioritize_b: bool, greedy: bool) -> list[list[OpId]]:
    """One variant's order (raises :class:`Unbuildable` where the authors' code asserts)."""
    b = _Build(x)
    for i in range(b.m):
        if i == 0:
            _first_microbatch(b, allow_bubble)
            continue
        take = [_wants_f(b, j, prioritize_b) for j in range(b.p)]
        for j in range(b.p - 2, -1, -1):
            take[j] = take[j] and take[j + 1]
        for j in range(b.p):
            if not take[j]:
                continue
            b.free_for(j, "F")
            if j > 0:
                b.fill_wait(j, b.ready("F", j, b.count["F"][j]), greedy)
            b.put(j, "F")
        for j in range(b.p - 1, -1, -1):
            b.free_for(j, "B")
            if j + 1 < b.p:
                b.fill_wait(j, b.ready("B", j, i), greedy)
            if j == 0 and b.count["F"][j] == b.m:
                while b.pending_w(j):
                    b.put(j, "W")
            b.put(j, "B")
    for j in range(b.p):
        while b.count["W"][j] < b.m:
            b.put(j, "W")
    return order_of(b.ops)


def applies(problem: Problem) -> bool:
    return problem.placement == "loop" and problem.stages_per_device == 1 and problem.split_backward


def zb_auto_orders(problem: Problem) -> list[list[list[OpId]]]:
    """The eight variants' orders on both cost views (those that build) for a loop, v = 1, split-backward problem."""
    if not applies(problem):
        return []
    x = Inputs.of(problem)
    out = []
    for view in (x, x.median_costs()):
        for allow, prio, greedy in itertools.product((True, False), repeat=3):
            try:
                out.append(manual_order(view, allow, prio, greedy))
            except Unbuildable:
                continue
    return out


def zb_auto(problem: Problem) -> Timed | None:
    """The heuristic's best variant under our timing, within the cap (None when none builds)."""
    return best_of(problem, NAME, zb_auto_orders(problem))

"""The zero-bubble paper's automatic ZB-1p / ZB-2p construction (Qi et al., "Zero Bubble Pipeline
Parallelism", ICLR 2024, section 3.1: "automatic scheduling"), as a candidate for ``auto``.

Loop placement, one stage per device, split backward. Stage ``j`` (on device ``j``) is built one
microbatch round at a time, every stage in the same round:

1. round 0: an F on every stage; then, from the last stage up, warm-up Fs that fit the memory budget
   and end before the first B can come back from below (``fill``: while the next F would end by
   then, so the device never idles waiting); a stage keeps fewer warm-up Fs than the stage above it;
   then the first B on every stage, last stage first;
2. round ``i``: each stage takes its next F, unless (``hold``) it is two Fs ahead of the stage below
   and its F would delay that stage's next B by more than the bubble it may still take (the largest
   bubble of any stage so far minus its own); a stage takes an F only when the stage below does. Then
   every stage's B, last first. Before an F or B: Ws while the budget needs room, Ws that end before
   the pass's input arrives, and one more W when the wait left would exceed the bubble the stage may
   take (``eager``: whenever some wait is left). Stage 0 drains its Ws before its last Bs;
3. the Ws left.

The paper runs the eight (``fill``, ``hold``, ``eager``) variants and keeps the shortest; so does this
(a memory *budget* below the cap, :data:`BUDGETS`, is a knob that did not pay on the tuning set), on two
views of the costs: each stage's own, and one median per pass (:func:`median_view`, what the authors'
runtime hands the heuristic). Memory deltas and caps are read per stage, and the orders are timed by
our simulator on the real costs
(:func:`~pipesched.solver.timing.retime.compact`); ``auto`` keeps them as candidates, re-times the best
optimally and searches from it, so it is never worse than the paper's heuristic.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ..budget import PER_OP
from ..core.instance import Instance, OpId
from ..core.method import Method
from ..core.problem import Problem
from ..core.schedule import Order
from ..core.tolerance import within_cap
from ..timing.finalize import best_candidate_solver
from ..timing.retime import Incumbent, compact, order_score
from ..timing.simulate import DeadlockError, simulate

#: Budgets tried below each device's cap, in Fs of its stage (0: the cap itself, the paper's heuristic).
#: Policy, chosen on the tuning set: budgets of 1 and 2 Fs below the cap never gave a better order on its
#: eight loop, v = 1 cases (nor on the paper's p = 8 cases), so only the cap runs; the knob stays for a re-check.
BUDGETS: tuple[int, ...] = (0,)


@dataclass(frozen=True)
class ZBVariant:
    """One run of the construction: the paper's three switches and the budget below the cap."""

    fill: bool
    hold: bool
    eager: bool
    below_cap: int = 0


VARIANTS: tuple[ZBVariant, ...] = tuple(ZBVariant(f, h, e, k) for k in BUDGETS
                                        for f, h, e in itertools.product((True, False), repeat=3))


class _Stuck(Exception):
    """A variant cannot go on (no W left to free memory the next pass needs)."""


class _Stages:
    """Per stage: counts per kind, clock, memory level, bubble; the order written so far."""

    def __init__(self, inst: Instance, variant: ZBVariant) -> None:
        self.inst, self.p, self.m = inst, inst.devices, inst.microbatches
        self.variant = variant
        f = inst.delta["F"]
        self.cap = [lim - variant.below_cap * max(f[j], 0.0) for j, lim in enumerate(inst.limit)]
        self.n = {k: [0] * self.p for k in "FBW"}
        self.clock = [0.0] * self.p
        self.level = [0.0] * self.p
        self.bubble = [0.0] * self.p
        self.finish: dict[OpId, float] = {}
        self.order: Order = [[] for _ in range(self.p)]

    def dur(self, kind: str, j: int) -> float:
        return self.inst.duration[kind][j]

    def fits(self, kind: str, j: int, level: float | None = None) -> bool:
        return within_cap((self.level[j] if level is None else level) + self.inst.delta[kind][j], self.cap[j])

    def link(self, j: int) -> float:
        """Latency between stages ``j`` and ``j + 1``."""
        return self.inst.comms[j] if self.inst.comms else self.inst.comm

    def arrival(self, kind: str, j: int, i: int) -> float:
        """When the neighbour's output for pass ``kind`` of microbatch ``i`` reaches stage ``j``."""
        if kind == "F" and j > 0:
            return self.finish.get(OpId("F", j - 1, i), 0.0) + self.link(j - 1)
        if kind == "B" and j < self.p - 1:
            return self.finish.get(OpId("B", j + 1, i), 0.0) + self.link(j)
        return 0.0

    def put(self, j: int, kind: str) -> None:
        i = self.n[kind][j]
        if i >= self.m or not self.fits(kind, j):
            raise _Stuck
        idle_end = self.clock[j] + self.dur(kind, j)
        end = idle_end if kind == "W" else max(idle_end, self.arrival(kind, j, i) + self.dur(kind, j))
        if self.n["F"][j]:
            self.bubble[j] += end - idle_end
        op = OpId(kind, j, i)  # type: ignore[arg-type]
        self.finish[op] = self.clock[j] = end
        self.level[j] += self.inst.delta[kind][j]
        self.n[kind][j] += 1
        self.order[j].append(op)

    def w_left(self, j: int) -> bool:
        return self.n["W"][j] < self.n["B"][j]

    def affordable(self, j: int) -> float:
        return max(self.bubble) - self.bubble[j]

    def make_room(self, j: int, kind: str) -> None:
        while not self.fits(kind, j):
            if not self.w_left(j):
                raise _Stuck
            self.put(j, "W")

    def fill_wait(self, j: int, arrival: float) -> None:
        while self.w_left(j) and self.clock[j] + self.dur("W", j) <= arrival:
            self.put(j, "W")
        wait = arrival - self.clock[j]
        if self.w_left(j) and wait > 0 and (self.variant.eager or wait > self.affordable(j)):
            self.put(j, "W")


def _round_zero(st: _Stages) -> None:
    p = st.p
    for j in range(p):
        st.put(j, "F")
    warm = [0] * p
    back = st.finish[OpId("F", p - 1, 0)] + st.dur("B", p - 1)  # when the first B leaves stage j + 1
    for j in range(p - 2, -1, -1):
        level, t, due = st.level[j], st.clock[j], back + st.link(j)
        while st.n["F"][j] + warm[j] < st.m and st.fits("F", j, level):
            late = t + st.dur("F", j) > due if st.variant.fill else t >= due
            if late:
                break
            level += st.inst.delta["F"][j]
            t += st.dur("F", j)
            warm[j] += 1
        back = max(t, due) + st.dur("B", j)
    for j in range(1, p):
        while warm[j] > 0 and warm[j] >= warm[j - 1] and st.n["F"][j] + warm[j] < st.m:
            warm[j] -= 1
    for j in range(p):
        for _ in range(warm[j]):
            st.put(j, "F")
    for j in range(p - 1, -1, -1):
        st.put(j, "B")


def _takes_f(st: _Stages, j: int) -> bool:
    if st.n["F"][j] >= st.m:
        return False
    k = j + 1
    if not (st.variant.hold and k < st.p and st.n["F"][j] >= st.n["F"][k] + 2):
        return True
    next_b = st.clock[k] + st.dur("F", k) + st.dur("B", k) + st.link(j)
    if st.clock[j] >= next_b:
        return False
    extra, ws, level = 0.0, 0, st.level[j]
    while not st.fits("F", j, level) and st.n["W"][j] + ws < st.n["B"][j]:
        extra += st.dur("W", j)
        level += st.inst.delta["W"][j]
        ws += 1
    if st.clock[j] + st.dur("F", j) + extra <= next_b:
        return True
    return next_b - st.clock[j] > st.affordable(j)


def zb_auto_order(inst: Instance, variant: ZBVariant) -> Order:
    """The order one variant builds (module docstring); raises DeadlockError when it gets stuck."""
    st = _Stages(inst, variant)
    try:
        _round_zero(st)
        for i in range(1, st.m):
            take = [_takes_f(st, j) for j in range(st.p)]
            for j in range(st.p - 2, -1, -1):
                take[j] = take[j] and take[j + 1]
            for j in (j for j in range(st.p) if take[j]):
                st.make_room(j, "F")
                if j > 0:
                    st.fill_wait(j, st.arrival("F", j, st.n["F"][j]))
                st.put(j, "F")
            for j in range(st.p - 1, -1, -1):
                st.make_room(j, "B")
                if j < st.p - 1:
                    st.fill_wait(j, st.arrival("B", j, i))
                if j == 0 and st.n["F"][0] == st.m:
                    while st.w_left(0):
                        st.put(0, "W")
                st.put(j, "B")
        for j in range(st.p):
            while st.n["W"][j] < st.m:
                st.put(j, "W")
    except _Stuck:
        raise DeadlockError(f"zb-auto variant {variant} cannot fit the memory budget") from None
    return st.order


def _applies(problem: Problem) -> str | None:
    if problem.placement != "loop" or problem.stages_per_device != 1:
        return "zb-auto needs placement 'loop' with stages_per_device = 1"
    if not problem.split_backward:
        return "zb-auto needs split_backward: true (it schedules B and W separately)"
    return None


def median_view(inst: Instance) -> Instance:
    """``inst`` with one cost per pass: the upper median over stages (the costs the construction decides
    on; the orders are still timed on ``inst``)."""
    stages = inst.num_stages
    return dataclasses.replace(inst, duration={k: (sorted(x)[len(x) // 2],) * stages
                                               for k, x in inst.duration.items()})


def best_orders(inst: Instance, orders: Iterable[Order], keep: int) -> list[Incumbent]:
    """The ``keep`` best distinct ``orders``: each screened by its earliest times (one simulation), the
    best ``2 * keep`` then timed by :func:`~pipesched.solver.timing.retime.compact` (ties: first built)."""
    screened, seen = [], set()
    for k, order in enumerate(orders):
        key = tuple(tuple(ops) for ops in order)
        if key in seen:
            continue
        seen.add(key)
        try:
            early = simulate(inst, order)
        except DeadlockError:
            continue
        screened.append((order_score(inst, order, early), k, order))
    screened.sort(key=lambda c: c[:2])
    timed = [Incumbent.of(inst, order, compact(inst, order)) for _, _, order in screened[: 2 * keep]]
    return sorted(timed, key=lambda inc: inc.objective)[:keep]


def _all_orders(inst: Instance) -> Iterator[Order]:
    for view, variant in itertools.product((inst, median_view(inst)), VARIANTS):
        try:
            yield zb_auto_order(view, variant)
        except DeadlockError:
            continue


def zb_auto_candidates(inst: Instance, keep: int = 2) -> list[Incumbent]:
    """The ``keep`` best distinct orders over :data:`VARIANTS` on both cost views."""
    if inst.placement != "loop" or inst.stages_per_device != 1 or not inst.split_backward:
        return []
    return best_orders(inst, _all_orders(inst), keep)


solve_zb_auto = best_candidate_solver("zb-auto", lambda inst: zb_auto_candidates(inst, keep=1))


ZB_AUTO = Method("zb-auto", "The zero-bubble paper's automatic ZB-1p/ZB-2p construction (its eight variants, a few "
                 "memory budgets); respects memory.limit; loop placement, v = 1, split backward.",
                 "search", solve_zb_auto, requires=_applies, cost_per_op=PER_OP.zb_auto)

"""Method ``greedy``'s rules (:class:`~.policies.GreedyPolicy`) on the engine's planned wakes
(:func:`.engine.run_planned`).

Greedy knows an op once its input is produced (it is *released* with the time it arrives, which
plans a wake of its device then); at a wake the device moves what has arrived into lanes and its
policy's rules pick:

* priority: lanes in rank order (``alternate``: F after B and B after F, W last), within a lane the
  oldest microbatch (``follow``: one lane, ordered by the recipe's position);
* admission: the cap and the banker's test (:class:`~.memory.BankersMemory`), with ``headroom`` a
  microbatch new to the device also leaves room for an older one's largest pending need;
* waiting: ``follow`` waits for the recipe's next op (until :meth:`GreedyRun.relax`), ``patient`` for a
  higher-ranked op arriving before the chosen one would end.

The chosen op starts at the earliest time its device order allows (the device may have idled before
the wake), so the start times are what :func:`~...timing.simulate.simulate` gives.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence

from ...core.instance import Instance, OpId
from ...core.schedule import Order
from .memory import BankersMemory
from .policies import GreedyPolicy

Item = tuple[tuple, float, OpId]  # (priority key, ready time, op) in a lane


def priority(policy: GreedyPolicy, position: dict[OpId, int] | None) -> Callable[[str, int, int], tuple]:
    """The key within a lane: the recipe's position (``follow``), else rank, oldest microbatch, and
    for F the deeper stage first (it is further along its path)."""
    if position is not None:
        return lambda kind, s, i: (position[OpId(kind, s, i)],)  # type: ignore[arg-type]
    rank = policy.rank
    return lambda kind, s, i: (rank[kind], i, -s if kind == "F" else s)


def admission(inst: Instance, policy: GreedyPolicy, mem: BankersMemory | None) -> Callable[[int, OpId], bool] | None:
    """Whether memory lets ``op`` start on device ``d`` now; None when nothing is capped."""
    if mem is None:
        return None
    delta, headroom = inst.delta, policy.headroom

    def allows(d: int, op: OpId) -> bool:
        change = delta[op.kind][op.stage]
        return change <= 0 or (mem.allows(d, op.microbatch, change)
                               and (not headroom or mem.leaves_headroom(d, op.microbatch, change)))

    return allows


class GreedyRun:
    """One policy's run: the engine's ``look`` and ``start`` (:func:`.engine.run_planned`), its first
    wakes, and the answer (``order`` and ``times``)."""

    def __init__(self, inst: Instance, policy: GreedyPolicy, reference: Order | None = None) -> None:
        p, S = inst.devices, inst.num_stages
        self.inst, self.policy = inst, policy
        self.follow = reference is not None
        position = {op: k for ops in reference for k, op in enumerate(ops)} if reference is not None else None
        self.key = priority(policy, position)
        self.done_at = [[False] * len(ops) for ops in reference] if reference is not None else []
        self.next_at = [0] * p  # first position of each device's recipe order not yet run
        self.relaxed = False  # set once strict following has left every device waiting
        self.lanes: tuple[str, ...] = ("*",) if self.follow else tuple(sorted(inst.kinds, key=policy.rank.__getitem__))
        self.link_next = [inst.link(s, s + 1) if s < S - 1 else 0.0 for s in range(S)]
        self.first_of = [inst.copy_range(s)[0] for s in range(S)]  # a microbatch's chain: its copy (dual) or all
        self.last_of = [inst.copy_range(s)[1] for s in range(S)]
        self.mem = BankersMemory(inst) if any(math.isfinite(x) for x in inst.limit) else None
        self.allows = admission(inst, policy, self.mem)
        self.pending: list[list[Item]] = [[] for _ in range(p)]  # (ready, key, op) not yet arrived
        self.avail: list[dict[str, list[Item]]] = [{k: [] for k in self.lanes} for _ in range(p)]
        self.last = ["B"] * p  # last F or B each device ran (for ``alternate``)
        self.free = [0.0] * p
        self.order: Order = [[] for _ in range(p)]
        self.times: dict[OpId, float] = {}
        self.first: list[tuple[int, float]] = []
        for lo in sorted(set(self.first_of)):  # dual: one stream per direction
            stream = inst.stage_microbatches(lo)
            if stream:
                self.first.append(self._release(OpId("F", inst.microbatch_stages(stream[0])[0], stream[0]), 0.0))

    def _release(self, op: OpId, t: float) -> tuple[int, float]:
        """``op``'s input arrives at ``t``: the wake it plans for its device."""
        d = self.inst.device_of_stage[op.stage]
        heapq.heappush(self.pending[d], (t, self.key(*op), op))  # type: ignore[arg-type]
        return d, max(self.free[d], t)

    def _lane(self, op: OpId) -> str:
        return "*" if self.follow else op.kind

    def _own_wake(self, d: int) -> tuple[int, float] | None:
        """When device ``d``, free from ``free[d]``, next looks: then if an op waits in a lane, else when
        its next op arrives (None: nothing is on its way)."""
        if any(self.avail[d].values()):
            return d, self.free[d]
        queue = self.pending[d]
        return (d, max(self.free[d], queue[0][0])) if queue else None

    def _kinds(self, d: int) -> Sequence[str]:
        if self.policy.alternate:
            return ("F", "B", "W") if self.last[d] == "B" else ("B", "F", "W")
        return self.lanes

    def _pick(self, d: int) -> Item | None:
        """Best arrived op of device ``d`` that memory allows, by the policy's ranking."""
        heaps, allows = self.avail[d], self.allows
        for kind in self._kinds(d):
            heap = heaps.get(kind)
            if not heap:
                continue
            if self.follow and not self.relaxed and heap[0][0][0] != self.next_at[d]:
                return None  # the recipe's next op has not arrived: wait for it, as the recipe does
            if allows is None:
                return heapq.heappop(heap)
            skipped = []
            found = None
            while heap:
                item = heapq.heappop(heap)
                if allows(d, item[2]):
                    found = item
                    break
                skipped.append(item)
            for item in skipped:
                heapq.heappush(heap, item)
            if found is not None:
                return found
        return None

    def look(self, d: int, t: float) -> tuple[float, Item | None]:
        """Device ``d``'s decision at wake ``t``: (start, op), or (when to look again, None)."""
        queue, lanes = self.pending[d], self.avail[d]
        while queue and queue[0][0] <= t:
            ready, k, op = heapq.heappop(queue)
            heapq.heappush(lanes[self._lane(op)], (k, ready, op))
        chosen = self._pick(d)
        if chosen is None:
            return (queue[0][0] if queue else math.inf), None  # look again when the next op arrives
        k, ready, op = chosen
        if self.policy.patient and queue:
            arrival, k_next, _ = queue[0]
            if k_next[0] < k[0] and arrival < t + self.inst.duration[op.kind][op.stage]:
                heapq.heappush(lanes[self._lane(op)], chosen)  # a higher-ranked op arrives before this would end
                return arrival, None
        return max(self.free[d], ready), chosen

    def start(self, d: int, t: float, chosen: Item) -> list[tuple[int, float]]:
        """Run ``chosen`` on ``d`` from ``t``: memory, the recipe's progress, the ops it releases; the wakes."""
        inst, release = self.inst, self._release
        kind, s, i = op = chosen[2]
        end = t + inst.duration[kind][s]
        self.free[d] = end
        self.order[d].append(op)
        self.times[op] = t
        if kind != "W":
            self.last[d] = kind
        if self.follow:
            flags = self.done_at[d]
            flags[chosen[0][0]] = True
            while self.next_at[d] < len(flags) and flags[self.next_at[d]]:
                self.next_at[d] += 1
        if self.mem is not None:
            if kind == "F" and s == self.first_of[s]:
                self.mem.admit(i)
            self.mem.apply(d, i, inst.delta[kind][s])
        wakes = []
        if kind == "F":
            if s == self.first_of[s] and i + 1 in inst.stage_microbatches(s):
                wakes.append(release(OpId("F", s, i + 1), 0.0))
            wakes.append(release(OpId("F", s + 1, i) if s < self.last_of[s] else OpId("B", s, i), end + self.link_next[s]))
        elif kind == "B":
            if s > self.first_of[s]:
                wakes.append(release(OpId("B", s - 1, i), end + self.link_next[s - 1]))
            if inst.split_backward:
                wakes.append(release(OpId("W", s, i), end))
        if (own := self._own_wake(d)) is not None:
            wakes.append(own)
        return wakes

    def relax(self) -> list[tuple[int, float]]:
        """Strict following stalled: from now on run without waiting for the recipe's order; the wakes."""
        self.relaxed = True
        return [w for d in range(self.inst.devices) if (w := self._own_wake(d)) is not None]

"""Exact optimum of tiny problems by enumerating every per-device op order (test oracle).

Both objectives are *regular* given an order: once each device's order is fixed, the best
times follow exactly, so the optimum is the best over all orders.

- Makespan: the earliest times of an order are optimal for that order.
- Stage span: for a fixed order the times are difference constraints ``t_b >= t_a + w``; asking
  every device's span to be ``<= Z`` adds an edge ``last_d -> first_d`` of weight ``p_last - Z``.
  The system is feasible iff no cycle has positive weight, and every cycle is DAG paths
  ``first_d ~> last_e`` joined by span edges, so the least ``Z`` is the maximum cycle mean of
  ``M[d][e] = longest path from first_d's start to last_e's end`` (exact, over simple cycles).

Search: devices pick their next op in a fixed device priority whenever their previous op has
been timed, so each tuple of orders is visited once; orders that exceed ``memory.limit`` or
deadlock die early. Microbatches are interchangeable, so ``F(0, i)`` runs in index order.
Branch and bound keeps ``p, m <= 3`` fast: it prunes with its own simple bounds (work left per
device, chain tails, the longest path inside a device's window), never with
:mod:`pipesched.solver.bounds`, which it tests; its first incumbent is the first order it completes
(devices take the op that can start earliest).

It shares no code with the solver: the ops, dependencies, memory and limits come from
:func:`wire_oracle.graph`, which reads the problem's wire format, not the solver's ``Instance``.
Import as ``from bruteforce import optimum`` from tests in this folder.
"""

from __future__ import annotations

import itertools
import math

import wire_oracle
from wire_oracle import Graph, Op

from pipesched.solver import Problem

EPS = 1e-9


class _Search:
    def __init__(self, inst: Graph) -> None:
        self.inst = inst
        ops = inst.ops()
        self.ops = ops
        index = {op: k for k, op in enumerate(ops)}
        n = len(ops)
        p = inst.devices
        self.dev = [inst.device(op) for op in ops]
        self.cost = [inst.cost(op) for op in ops]
        self.delta = [inst.mem(op) for op in ops]
        self.need = [inst.need(op) for op in ops]  # positive delta + B's transient
        self.preds = [[(index[a], lag) for a, lag in inst.predecessors(op)] for op in ops]
        self.span = inst.objective == "stage_span"
        # same-device ancestors must come earlier in the device's order, or it deadlocks
        anc: list[set[int]] = [set() for _ in range(n)]
        for k in sorted(range(n), key=lambda k: self._depth(ops[k])):
            for a, _ in self.preds[k]:
                anc[k] |= anc[a] | {a}
        self.local_anc = [[a for a in anc[k] if self.dev[a] == self.dev[k]] for k in range(n)]
        # symmetry: F(0, i) after F(0, i-1)
        self.sym = [index[Op("F", op.stage, op.microbatch - 1)]
                    if op.kind == "F" and not inst.preds[op] and Op("F", op.stage, op.microbatch - 1) in index
                    else -1 for op in ops]
        # static tail: least time from an op's end to the end of the schedule
        tail = [0.0] * n
        for k in sorted(range(n), key=lambda k: -self._depth(ops[k])):
            for a, lag in self.preds[k]:
                tail[a] = max(tail[a], lag + self.cost[k] + tail[k])
        self.tail = tail
        self.on_device = [[k for k in range(n) if self.dev[k] == d] for d in range(p)]
        self.limit = inst.limit
        # state
        self.start: list[float | None] = [None] * n
        self.placed = [False] * n
        self.pending = [-1] * p
        self.last = [-1] * p  # last timed op per device
        self.first = [-1] * p
        self.free = [0.0] * p
        self.live = [0.0] * p
        self.left_work = [sum(self.cost[k] for k in self.on_device[d]) for d in range(p)]
        self.left = [len(self.on_device[d]) for d in range(p)]
        self.timed = 0
        # L[d][k]: longest path from the start of device d's first op to the start of op k
        self.L = [[-math.inf] * n for _ in range(p)]
        self.best = math.inf
        self.found = False  # a complete schedule at or below the incumbent

    def _depth(self, op: Op) -> int:
        s = self.inst.num_stages
        return {"F": op.stage, "B": 2 * s - 1 - op.stage, "W": 2 * s - op.stage}[op.kind]

    # ------------------------------------------------------------ timing
    def _ready(self, k: int) -> bool:
        return all(self.start[a] is not None for a, _ in self.preds[k])

    def _time(self, k: int) -> None:
        d = self.dev[k]
        t = self.free[d]
        for a, lag in self.preds[k]:
            t = max(t, self.start[a] + self.cost[a] + lag)  # type: ignore[operator]
        self.start[k] = t
        self.free[d] = t + self.cost[k]
        prev = self.last[d]
        if prev < 0:
            self.first[d] = k
        self.last[d] = k
        self.timed += 1
        if self.span:
            for e in range(self.inst.devices):
                row = self.L[e]
                v = 0.0 if (e == d and prev < 0) else -math.inf
                if prev >= 0:
                    v = max(v, row[prev] + self.cost[prev])
                for a, lag in self.preds[k]:
                    v = max(v, row[a] + self.cost[a] + lag)
                row[k] = v

    def _untime(self, k: int, saved: tuple[float, int, int]) -> None:
        d = self.dev[k]
        self.start[k] = None
        self.free[d], self.last[d], self.first[d] = saved
        self.timed -= 1

    def _propagate(self) -> list[tuple[int, tuple[float, int, int]]]:
        done = []
        changed = True
        while changed:
            changed = False
            for d, k in enumerate(self.pending):
                if k >= 0 and self._ready(k):
                    done.append((k, (self.free[d], self.last[d], self.first[d])))
                    self._time(k)
                    self.pending[d] = -1
                    changed = True
        return done

    # ------------------------------------------------------------ bounds and leaves
    def _bound(self) -> float:
        p = self.inst.devices
        if self.span:
            best = 0.0
            for d in range(p):
                if self.last[d] >= 0:
                    k = self.last[d]
                    best = max(best, self.L[d][k] + self.cost[k] + self.left_work[d])
                else:
                    best = max(best, self.left_work[d])
            return best
        best = max(self.free[d] + self.left_work[d] for d in range(p))
        for d in range(p):
            k = self.last[d]
            if k >= 0:
                best = max(best, self.start[k] + self.cost[k] + self.tail[k])  # type: ignore[operator]
        return best

    def _value(self) -> float:
        p = self.inst.devices
        if not self.span:
            return max(self.free)
        M = [[(self.L[d][self.last[e]] + self.cost[self.last[e]]) if self.last[e] >= 0 else -math.inf
              for e in range(p)] for d in range(p)]
        active = [d for d in range(p) if self.last[d] >= 0]
        best = 0.0
        for r in range(1, len(active) + 1):
            for combo in itertools.combinations(active, r):
                for rest in itertools.permutations(combo[1:]):
                    cycle = (combo[0], *rest, combo[0])
                    total = sum(M[a][b] for a, b in itertools.pairwise(cycle))
                    best = max(best, total / r)
        return best

    # ------------------------------------------------------------ search
    def _candidates(self, d: int) -> list[int]:
        out = []
        for k in self.on_device[d]:
            if self.placed[k] or any(not self.placed[a] for a in self.local_anc[k]):
                continue
            if self.sym[k] >= 0 and not self.placed[self.sym[k]]:
                continue
            if self.need[k] > 0 and self.live[d] + self.need[k] > self.limit[d] * (1 + EPS) + EPS:
                continue
            out.append(k)

        def est(k: int) -> float:
            if not self._ready(k):
                return math.inf
            return max([self.free[d]] + [self.start[a] + self.cost[a] + lag for a, lag in self.preds[k]])  # type: ignore[operator]

        return sorted(out, key=est)

    def dfs(self) -> None:
        if self.timed == len(self.ops):
            value = self._value()
            if value <= self.best:
                self.best, self.found = value, True
            return
        if self._bound() >= self.best - EPS:
            return
        d = next((d for d in range(self.inst.devices) if self.pending[d] < 0 and self.left[d] > 0), -1)
        if d < 0:
            return  # every device with work left waits on another: deadlock
        for k in self._candidates(d):
            self.placed[k] = True
            self.pending[d] = k
            self.left[d] -= 1
            self.left_work[d] -= self.cost[k]
            self.live[d] += self.delta[k]
            done = self._propagate()
            self.dfs()
            for j, saved in reversed(done):
                self._untime(j, saved)
                self.pending[self.dev[j]] = j
            self.live[d] -= self.delta[k]
            self.left_work[d] += self.cost[k]
            self.left[d] += 1
            self.pending[d] = -1
            self.placed[k] = False


#: Optima computed in this session, by the problem's JSON: several test files brute-force the same
#: problems (test_cpsat_cut_proofs.py the cases of test_bounds_shapes.py), each computed once.
_optima: dict[str, float | None] = {}


def optimum(problem: Problem) -> float | None:
    """The least objective value over all schedules of ``problem``; None when none exists."""
    key = problem.model_dump_json()
    if key not in _optima:
        search = _Search(wire_oracle.graph(problem))
        search.dfs()
        _optima[key] = search.best if search.found else None
    return _optima[key]

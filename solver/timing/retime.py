"""Optimal start times for a fixed per-device order, under either objective.

For ``makespan`` the simulator's earliest times are optimal (with a step tail too: every sync and
optimizer step only moves later when an op does). For ``stage_span`` they are not always, and neither
is :func:`compact` (it only tries two timings); with a step tail the search below minimises the ops'
spans and the better of its timing and the earliest is kept, which need not be optimal. Without: with
the order fixed, the best timing is the linear programme

    min Z  s.t.  x_b >= x_a + w_ab            (precedence with comm; next op on a device)
                 x_first(d) >= x_last(d) + d_last(d) - Z      (span of device d at most Z)
                 x >= 0,

a system of difference constraints with one parametric edge per device. It is feasible for a
given ``Z`` exactly when the constraint graph has no positive cycle, and its least solution is
the longest-path potential (Bellman-Ford). The least feasible ``Z`` is the largest cycle ratio
``W(C) / k(C)`` (weight without ``Z`` over the number of span edges on cycle ``C``); we find it
by Dinkelbach iteration: start at a lower bound, and while Bellman-Ford finds a positive cycle,
raise ``Z`` to that cycle's ratio. Every step strictly raises ``Z`` and retires a cycle, so it
ends, and in practice after a handful of rounds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..budget import EXACT_TIMING_OPS
from ..core.instance import Instance, OpId
from ..core.metrics import makespan, objective_value
from ..core.schedule import Order
from ..core.tolerance import SEARCH_REL_TOL
from .simulate import latest_starts, simulate


def compact(inst: Instance, order: Sequence[Sequence[OpId]]) -> dict[OpId, float]:
    """Best start times we know for a fixed order under the problem's objective.

    Makespan: the earliest times are optimal for a fixed order. Stage span: also try starting
    each device's first op as late as it can go without delaying the end, which trims spans
    the earliest times leave idle at a device's front; keep whichever is better.
    """
    early = simulate(inst, order)
    if inst.objective != "stage_span":
        return early
    horizon = order_score(inst, order, early)[1]
    late = latest_starts(inst, order, horizon)
    release = {ops[0]: late[ops[0]] for ops in order if ops}
    shifted = simulate(inst, order, release)
    return min((early, shifted), key=lambda s: order_score(inst, order, s))


def order_score(inst: Instance, order: Sequence[Sequence[OpId]], start: Mapping[OpId, float]) -> tuple[float, float]:
    """``(objective, makespan)`` of ``start`` when it times ``order`` (ops of a device one after
    another in its list): read from each device's first and last op, ``O(p)`` instead of the
    ``O(n)`` of :func:`pipesched.solver.core.metrics.objective_value` (the grid scores every order); with a
    step tail (gradient syncs, optimizer) the tail needs every op's end, so it is that full computation."""
    if inst.tail:
        return objective_value(inst, start), makespan(inst, start)
    spans, end = [], 0.0
    for ops in order:
        if ops:
            first, last = ops[0], ops[-1]
            t_end = start[last] + inst.cost(last)
            spans.append(t_end - start[first])
            end = max(end, t_end)
    objective = max(spans, default=0.0) if inst.objective == "stage_span" else end
    return objective, end


@dataclass(frozen=True)
class Incumbent:
    """A valid order with its exact times and objective."""

    order: Order
    start: dict[OpId, float]
    objective: float

    @classmethod
    def of(cls, inst: Instance, order: Order, start: Mapping[OpId, float] | None = None) -> Incumbent:
        times = dict(start) if start is not None else compact(inst, order)
        return cls(order, times, objective_value(inst, times))


def retime(inst: Instance, order: Order) -> Incumbent:
    """Exact times for an order: its optimal timing when affordable, else :func:`compact`'s."""
    if inst.num_ops > EXACT_TIMING_OPS:
        return Incumbent.of(inst, order)
    return Incumbent.of(inst, order, best_times(inst, order))


def best_times(inst: Instance, order: Sequence[Sequence[OpId]]) -> dict[OpId, float]:
    """Start times minimising the problem's objective for ``order`` (raises DeadlockError if none)."""
    early = simulate(inst, order)
    if inst.objective != "stage_span":
        return early
    span = min_span_times(inst, order, early)
    return min((early, span), key=lambda s: objective_value(inst, s))


def min_span_times(
    inst: Instance, order: Sequence[Sequence[OpId]], early: dict[OpId, float]
) -> dict[OpId, float]:
    """Least start times of ``order`` whose largest per-device span is minimal (see module doc).

    ``early`` (the simulator's times) only fixes the order edges are scanned in, which makes
    Bellman-Ford converge in a few passes.
    """
    ops = sorted(early, key=lambda op: early[op])
    index = {op: k for k, op in enumerate(ops)}
    cost = [inst.cost(op) for op in ops]
    edges: list[tuple[int, int, float, int]] = []  # (from, to, weight, span edges: 0 or 1)
    for op in ops:
        for pred, lag in inst.predecessors(op):
            edges.append((index[pred], index[op], cost[index[pred]] + lag, 0))
    for dev_ops in order:
        for a, b in zip(dev_ops, dev_ops[1:], strict=False):
            edges.append((index[a], index[b], cost[index[a]], 0))
        if dev_ops:
            first, last = index[dev_ops[0]], index[dev_ops[-1]]
            edges.append((last, first, cost[last], 1))
    edges.sort(key=lambda e: (e[3], e[0]))
    scale = max(1.0, max(early.values(), default=0.0) + max(cost, default=0.0))
    z = max(inst.device_work())
    while True:
        dist, cycle = _longest_paths(len(ops), edges, z, SEARCH_REL_TOL * scale)
        if cycle is None:
            return {op: dist[k] for k, op in enumerate(ops)}
        weight = sum(edges[e][2] for e in cycle)
        spans = sum(edges[e][3] for e in cycle)
        if not spans:  # a cycle of plain precedences: the simulator would have caught it
            raise ValueError("order has a cyclic dependency")
        z = max(weight / spans, z + SEARCH_REL_TOL * scale)  # strictly up, even through float noise


def _longest_paths(
    n: int, edges: list[tuple[int, int, float, int]], z: float, eps: float
) -> tuple[list[float], list[int] | None]:
    """Bellman-Ford longest paths from a source joined to every node by a 0 edge.

    Returns the potentials, or a positive cycle (as edge indices) when there is one.
    """
    dist = [0.0] * n
    parent = [-1] * n
    for _ in range(n + 1):
        changed = -1
        for k, (a, b, w, span) in enumerate(edges):
            cand = dist[a] + w - z * span
            if cand > dist[b] + eps:
                dist[b] = cand
                parent[b] = k
                changed = b
        if changed < 0:
            return dist, None
    node = changed
    for _ in range(n):  # step back onto the cycle
        node = edges[parent[node]][0]
    cycle = []
    cur = node
    while True:
        k = parent[cur]
        cycle.append(k)
        cur = edges[k][0]
        if cur == node:
            return dist, cycle

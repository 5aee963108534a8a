"""Earliest-time event simulator: a per-device op order in, exact start times out.

Any order from anywhere (a classic recipe, a solver, a hand-written file) gets its times
here, so every method shares one notion of when an op can run: as soon as its device is
free and every predecessor has ended (plus comm across devices).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..core.instance import Instance, OpId


class DeadlockError(ValueError):
    """The order cannot be executed: some device waits forever."""


def simulate(
    inst: Instance,
    order: Sequence[Sequence[OpId]],
    release: Mapping[OpId, float] | None = None,
) -> dict[OpId, float]:
    """Start time of every op in ``order`` when each runs as early as its order allows.

    ``release`` optionally gives earliest start times for some ops (used to shift a device's
    first op later without changing the order). Raises :class:`DeadlockError` naming the
    stuck ops when the order waits on an op that can never run first.
    """
    if len(order) != inst.devices:
        raise ValueError(f"order has {len(order)} device lists but the problem has {inst.devices} devices")
    pos = [0] * inst.devices
    free = [0.0] * inst.devices
    start: dict[OpId, float] = {}
    end: dict[OpId, float] = {}
    waiting: dict[OpId, list[int]] = {}
    stack = list(range(inst.devices - 1, -1, -1))
    while stack:
        d = stack.pop()
        ops = order[d]
        while pos[d] < len(ops):
            op = ops[pos[d]]
            t = free[d]
            blocker = None
            for pred, lag in inst.predecessors(op):
                e = end.get(pred)
                if e is None:
                    blocker = pred
                    break
                t = max(t, e + lag)
            if blocker is not None:
                waiting.setdefault(blocker, []).append(d)
                break
            if release is not None:
                t = max(t, release.get(op, 0.0))
            if op in start:
                raise ValueError(f"{op} appears more than once in the order")
            start[op] = t
            end[op] = free[d] = t + inst.cost(op)
            pos[d] += 1
            stack.extend(waiting.pop(op, ()))
    stuck = [f"device {d} waits at {order[d][pos[d]]}" for d in range(inst.devices) if pos[d] < len(order[d])]
    if stuck:
        raise DeadlockError("order deadlocks: " + "; ".join(stuck))
    return start


def latest_starts(inst: Instance, order: Sequence[Sequence[OpId]], horizon: float) -> dict[OpId, float]:
    """As-late-as-possible start times for ``order`` with every op ending by ``horizon``.

    The mirror of :func:`simulate`; used to shift each device's work towards its end so that
    per-device spans (the ``stage_span`` objective) shrink without changing the order.
    """
    pos = [len(ops) - 1 for ops in order]
    free = [horizon] * inst.devices
    start: dict[OpId, float] = {}
    waiting: dict[OpId, list[int]] = {}
    stack = list(range(inst.devices))
    while stack:
        d = stack.pop()
        ops = order[d]
        while pos[d] >= 0:
            op = ops[pos[d]]
            t_end = free[d]
            blocker = None
            for succ, lag in inst.successors(op):
                s = start.get(succ)
                if s is None:
                    blocker = succ
                    break
                t_end = min(t_end, s - lag)
            if blocker is not None:
                waiting.setdefault(blocker, []).append(d)
                break
            start[op] = free[d] = t_end - inst.cost(op)
            pos[d] -= 1
            stack.extend(waiting.pop(op, ()))
    if any(p >= 0 for p in pos):
        raise DeadlockError("order deadlocks when scheduled backwards")
    return start

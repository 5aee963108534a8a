"""Earliest-time event simulator: a per-device op order in, exact start times out.

Any order from anywhere (a classic recipe, a solver, a hand-written file) gets its times
here, so every method shares one notion of when an op can run: as soon as its device is
free and every predecessor has ended (plus comm across devices).

Why flat lists indexed by ``stage * m + microbatch``: this is the innermost loop of the
heuristics, the local search and every re-timing (issue 12: at 98k ops, asking
:meth:`Instance.predecessors` per op made a pass 0.5 s, five times this). The dependency rules
still come from the instance, read once per (kind, stage) by :func:`_graph`: an op's
predecessor and successors depend on its kind and stage only, with the same microbatch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..core.instance import Instance, OpId

_KIND = {"F": 0, "B": 1, "W": 2}


class DeadlockError(ValueError):
    """The order cannot be executed: some device waits forever."""


@dataclass(frozen=True)
class _Graph:
    """The dependency rules as per-(kind code, stage) tables, from :meth:`Instance.predecessors`."""

    codes: dict[str, int]  # kind -> code, for the kinds this problem has
    pred: tuple[tuple[tuple[int, int, float] | None, ...], ...]  # [k][s] -> (kind, stage, lag) or None
    succ: tuple[tuple[tuple[tuple[int, int, float], ...], ...], ...]  # [k][s] -> ((kind, stage, lag), ...)
    dur: tuple[tuple[float, ...], ...]  # [k][s]


def _graph(inst: Instance) -> _Graph:
    S = inst.num_stages
    codes = {kind: _KIND[kind] for kind in inst.kinds}
    pred: list[list[tuple[int, int, float] | None]] = [[None] * S for _ in range(3)]
    succ: list[list[tuple[tuple[int, int, float], ...]]] = [[()] * S for _ in range(3)]
    for kind, k in codes.items():
        for s in range(S):
            ps = inst.predecessors(OpId(kind, s, 0))
            if len(ps) > 1 or any(q.microbatch != 0 for q, _ in ps):
                raise NotImplementedError("the simulator expects one predecessor of the same microbatch")
            pred[k][s] = (_KIND[ps[0][0].kind], ps[0][0].stage, ps[0][1]) if ps else None
            succ[k][s] = tuple((_KIND[q.kind], q.stage, lag) for q, lag in inst.successors(OpId(kind, s, 0)))
    dur = tuple(inst.duration.get(kind, (0.0,) * S) for kind in ("F", "B", "W"))
    return _Graph(codes, tuple(map(tuple, pred)), tuple(map(tuple, succ)), dur)


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
    S, m = inst.num_stages, inst.microbatches
    n = S * m
    g = _graph(inst)
    codes, pred, dur = g.codes, g.pred, g.dur
    ends: list[list[float | None]] = [[None] * n, [None] * n, [None] * n]  # F, B, W ends by flat index
    pos = [0] * inst.devices
    free = [0.0] * inst.devices
    start: dict[OpId, float] = {}
    waiting: dict[int, list[int]] = {}  # kind * n + flat index of the blocking op -> devices
    stack = list(range(inst.devices - 1, -1, -1))
    while stack:
        d = stack.pop()
        ops = order[d]
        size = len(ops)
        t = t_free = free[d]
        while pos[d] < size:
            op = ops[pos[d]]
            kind, s, i = op
            k = codes.get(kind)
            if k is None or not (0 <= s < S and 0 <= i < m):
                raise ValueError(f"{op} is not an op of this problem")
            rule = pred[k][s]
            if rule is None:
                t = t_free
            else:
                pk, ps, lag = rule
                e = ends[pk][ps * m + i]
                if e is None:
                    waiting.setdefault(pk * n + ps * m + i, []).append(d)
                    break
                t = e + lag
                if t < t_free:
                    t = t_free
            if release is not None:
                t = max(t, release.get(op, 0.0))
            mine = ends[k]
            j = s * m + i
            if mine[j] is not None:
                raise ValueError(f"{op} appears more than once in the order")
            start[op] = t
            t_free = mine[j] = t + dur[k][s]
            pos[d] += 1
            if waiting:
                woken = waiting.pop(k * n + j, None)
                if woken:
                    stack.extend(woken)
        free[d] = t_free
    stuck = [f"device {d} waits at {order[d][pos[d]]}" for d in range(inst.devices) if pos[d] < len(order[d])]
    if stuck:
        raise DeadlockError("order deadlocks: " + "; ".join(stuck))
    return start


def latest_starts(inst: Instance, order: Sequence[Sequence[OpId]], horizon: float) -> dict[OpId, float]:
    """As-late-as-possible start times for ``order`` with every op ending by ``horizon``.

    The mirror of :func:`simulate`; used to shift each device's work towards its end so that
    per-device spans (the ``stage_span`` objective) shrink without changing the order.
    """
    S, m = inst.num_stages, inst.microbatches
    n = S * m
    g = _graph(inst)
    codes, succ, dur = g.codes, g.succ, g.dur
    starts: list[list[float | None]] = [[None] * n, [None] * n, [None] * n]
    pos = [len(ops) - 1 for ops in order]
    free = [horizon] * inst.devices
    out: dict[OpId, float] = {}
    waiting: dict[int, list[int]] = {}
    stack = list(range(inst.devices))
    while stack:
        d = stack.pop()
        ops = order[d]
        t_free = free[d]
        while pos[d] >= 0:
            op = ops[pos[d]]
            kind, s, i = op
            k = codes.get(kind)
            if k is None or not (0 <= s < S and 0 <= i < m):
                raise ValueError(f"{op} is not an op of this problem")
            t_end = t_free
            blocker = -1
            for sk, ss, lag in succ[k][s]:
                x = starts[sk][ss * m + i]
                if x is None:
                    blocker = sk * n + ss * m + i
                    break
                if x - lag < t_end:
                    t_end = x - lag
            if blocker >= 0:
                waiting.setdefault(blocker, []).append(d)
                break
            j = s * m + i
            t_free = starts[k][j] = t_end - dur[k][s]
            out[op] = t_free
            pos[d] -= 1
            if waiting:
                woken = waiting.pop(k * n + j, None)
                if woken:
                    stack.extend(woken)
        free[d] = t_free
    if any(p >= 0 for p in pos):
        raise DeadlockError("order deadlocks when scheduled backwards")
    return out

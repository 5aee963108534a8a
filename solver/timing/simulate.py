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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..core.instance import Instance, OpId
from ..core.tolerance import REPLAY_ABS_TOL
from .pairs import duration

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


@dataclass(frozen=True)
class Sharing:
    """Ranks that share cores (the runtime's CPU replays): while ``k`` ops run, each progresses at
    ``speed(k)`` of its cost per unit of time (processor sharing); an input sent to another device
    arrives ``handoff(j)`` later when ``j`` ops still run as its producer ends (the woken rank must get a
    core back). F&B pairs are not merged here: the CPU runtime runs a pair's two ops in sequence."""

    speed: Callable[[int], float]
    handoff: Callable[[int], float] | None = None


def simulate(
    inst: Instance,
    order: Sequence[Sequence[OpId]],
    release: Mapping[OpId, float] | None = None,
    *,
    pairs: Mapping[OpId, OpId] | None = None,
    sharing: Sharing | None = None,
    ends: dict[OpId, float] | None = None,
) -> dict[OpId, float]:
    """Start time of every op in ``order`` when each runs as early as its order allows.

    ``release`` optionally gives earliest start times for some ops (used to shift a device's
    first op later without changing the order). ``pairs`` (``costs.overlap_fb``, :mod:`.pairs`) maps
    each paired op to its partner: a pair stands as two adjacent ops of its device's order, F first,
    and runs as one op that starts once the device is free and both halves' inputs have arrived, and
    lasts the pair's duration. ``sharing`` replays the order on ranks that share cores
    (:class:`Sharing`). ``ends``, when given, receives every op's end time (under ``sharing`` it is not
    start + cost). Raises :class:`DeadlockError` naming the stuck ops when the order waits on an op that
    can never run first.
    """
    if len(order) != inst.devices:
        raise ValueError(f"order has {len(order)} device lists but the problem has {inst.devices} devices")
    if sharing is not None:
        if pairs:
            raise ValueError("a shared-cores replay runs F&B pairs as their two ops: pass no pairs")
        return _shared(inst, order, sharing, ends)
    if pairs:
        if inst.overlap is None:
            raise ValueError("F&B pairs need costs.overlap_fb")
        return _paired(inst, order, release, pairs, ends)
    return _plain(inst, order, release, ends)


_Walk = tuple[int, int, int, dict[str, int], tuple, tuple, list[list[float | None]], list[int], list[float],
              dict[OpId, float], dict[int, list[int]], list[int]]


def _walk(inst: Instance) -> _Walk:
    """The set-up of a walk over the devices' orders: stages, microbatches, ops per kind, the graph's
    codes, predecessors and durations, ends by kind and flat index (F, B, W), each device's position and
    free time, the starts, the devices waiting on each op (kind * n + flat index) and the device stack."""
    S, m, p = inst.num_stages, inst.microbatches, inst.devices
    n = S * m
    g = _graph(inst)
    return (S, m, n, g.codes, g.pred, g.dur, [[None] * n, [None] * n, [None] * n], [0] * p, [0.0] * p, {}, {},
            list(range(p - 1, -1, -1)))


def _no_stuck(order: Sequence[Sequence[OpId]], pos: list[int]) -> None:
    """Raise :class:`DeadlockError` naming each device whose order did not run to its end."""
    stuck = [f"device {d} waits at {order[d][pos[d]]}" for d in range(len(pos)) if pos[d] < len(order[d])]
    if stuck:
        raise DeadlockError("order deadlocks: " + "; ".join(stuck))


def _plain(inst: Instance, order: Sequence[Sequence[OpId]], release: Mapping[OpId, float] | None,
           out_ends: dict[OpId, float] | None) -> dict[OpId, float]:
    """:func:`simulate` without pairs or sharing: the hot loop of every heuristic and re-timing, kept
    free of their checks (one dict lookup per op more made it 60% slower at 98k ops)."""
    S, m, n, codes, pred, dur, ends, pos, free, start, waiting, stack = _walk(inst)
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
    _no_stuck(order, pos)
    if out_ends is not None:
        out_ends.update((op, t + dur[codes[op.kind]][op.stage]) for op, t in start.items())
    return start


def _paired(inst: Instance, order: Sequence[Sequence[OpId]], release: Mapping[OpId, float] | None,
            pairs: Mapping[OpId, OpId], ends: dict[OpId, float] | None) -> dict[OpId, float]:
    """:func:`simulate` with F&B pairs: a pair is one op of its device, both halves' inputs awaited."""
    S, m, n, codes, pred, dur, finish, pos, free, start, waiting, stack = _walk(inst)
    while stack:
        d = stack.pop()
        ops = order[d]
        size = len(ops)
        t_free = free[d]
        while pos[d] < size:
            op = ops[pos[d]]
            partner = pairs.get(op) if pairs else None
            group = (op,) if partner is None else (op, partner)
            if partner is not None and (pos[d] + 1 >= size or ops[pos[d] + 1] != partner):
                raise ValueError(f"device {d}: {op} and its pair {partner} must stand next to each other")
            t = t_free
            blocked = -1
            for x in group:
                kind, s, i = x
                k = codes.get(kind)
                if k is None or not (0 <= s < S and 0 <= i < m):
                    raise ValueError(f"{x} is not an op of this problem")
                rule = pred[k][s]
                if rule is not None:
                    pk, ps, lag = rule
                    e = finish[pk][ps * m + i]
                    if e is None:
                        blocked = pk * n + ps * m + i
                        break
                    if e + lag > t:
                        t = e + lag
                if release is not None:
                    t = max(t, release.get(x, 0.0))
            if blocked >= 0:
                waiting.setdefault(blocked, []).append(d)
                break
            length = dur[codes[op.kind]][op.stage] if partner is None else duration(inst, op, pairs)
            for x in group:
                kx = codes[x.kind]
                j = x.stage * m + x.microbatch
                if finish[kx][j] is not None:
                    raise ValueError(f"{x} appears more than once in the order")
                start[x] = t
                finish[kx][j] = t + length
                if waiting:
                    woken = waiting.pop(kx * n + j, None)
                    if woken:
                        stack.extend(woken)
            t_free = t + length
            pos[d] += len(group)
        free[d] = t_free
    _no_stuck(order, pos)
    if ends is not None:
        ends.update((op, finish[codes[op.kind]][op.stage * m + op.microbatch]) for op in start)  # type: ignore[misc]
    return start


def _shared(inst: Instance, order: Sequence[Sequence[OpId]], sharing: Sharing,
            ends: dict[OpId, float] | None) -> dict[OpId, float]:
    """:func:`simulate` under :class:`Sharing`: time advances from event to event (an op ends, an input
    arrives), every running op progressing at ``speed(k)`` meanwhile."""
    p = inst.devices
    start: dict[OpId, float] = {}
    end: dict[OpId, float] = {} if ends is None else ends
    extra: dict[OpId, float] = {}  # the hand-off delay after each op's end, for its other-device consumers
    nxt = [0] * p  # index of each device's next op
    running: dict[int, tuple[OpId, float]] = {}  # device -> (op, remaining work)
    t = 0.0
    total = sum(len(o) for o in order)
    done = 0
    while done < total:
        waits: list[float] = []  # start every op whose device is free and whose inputs have arrived by t
        for d in range(p):
            if d in running or nxt[d] >= len(order[d]):
                continue
            op = order[d][nxt[d]]
            ready = _arrival(inst, op, end, extra)
            if ready is None:
                continue  # a predecessor has not ended yet
            if ready <= t + REPLAY_ABS_TOL:
                running[d] = (op, inst.cost(op))
                start[op] = t
                nxt[d] += 1
            else:
                waits.append(ready)
        if not running and not waits:
            stuck = [f"device {d} waits at {order[d][nxt[d]]}" for d in range(p) if nxt[d] < len(order[d])]
            raise DeadlockError("order deadlocks: " + "; ".join(stuck))
        speed = sharing.speed(len(running)) if running else 1.0
        step = min([rem / speed for _, rem in running.values()] + [w - t for w in waits])
        t += step
        ended = []
        for d, (op, rem) in list(running.items()):
            rem -= step * speed
            if rem <= REPLAY_ABS_TOL:
                end[op] = t
                ended.append(op)
                done += 1
                del running[d]
            else:
                running[d] = (op, rem)
        if sharing.handoff is not None:
            for op in ended:
                extra[op] = sharing.handoff(len(running))
    return start


def _arrival(inst: Instance, op: OpId, end: Mapping[OpId, float], extra: Mapping[OpId, float]) -> float | None:
    """When ``op``'s inputs are there under sharing (predecessors' ends + lags, + the hand-off from
    another device), or None if one has not ended."""
    ready = 0.0
    for pred, lag in inst.predecessors(op):
        if pred not in end:
            return None
        cross = inst.device(pred) != inst.device(op)
        ready = max(ready, end[pred] + lag + (extra.get(pred, 0.0) if cross else 0.0))
    return ready


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

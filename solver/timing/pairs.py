"""F&B pairs as data (``costs.overlap_fb``): the partner map, a pair's duration, finding pairs in a timed
schedule, and busy time. Kept free of the validator and the simulator so both can read it
(:mod:`.overlap` has the why and the paired simulator).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..core.instance import Instance, OpId
from ..core.schedule import ScheduledOp
from ..core.tolerance import WIRE_REL_TOL

#: Each paired op -> its partner (both directions).
Pairs = Mapping[OpId, OpId]


def pair_map(pairs: Iterable[tuple[OpId, OpId]]) -> dict[OpId, OpId]:
    """``{F: B, B: F}`` for each ``(F, B)``."""
    out: dict[OpId, OpId] = {}
    for f, b in pairs:
        out[f], out[b] = b, f
    return out


def duration(inst: Instance, op: OpId, pairs: Pairs) -> float:
    """How long ``op`` occupies its device: its cost, or its pair's."""
    partner = pairs.get(op)
    if partner is None:
        return inst.cost(op)
    return inst.pair_cost(op, partner) if op.kind == "F" else inst.pair_cost(partner, op)


def timed_pairs(ops: Sequence[ScheduledOp], inst: Instance) -> dict[OpId, OpId]:
    """The pairs of a timed schedule: on one device, an F and a B with the same start and end lasting
    their pair's duration. Empty unless the problem sets ``costs.overlap_fb``. Zero-length ops are never
    a pair: an F and a B of cost 0 at one instant are the same schedule run back to back, and reading
    them as a pair would walk memory F first where the method released the B's memory first."""
    if inst.overlap is None:
        return {}
    groups: dict[tuple[int, float, float], list[ScheduledOp]] = {}
    for o in ops:
        groups.setdefault((o.device, o.start, o.end), []).append(o)
    scale = max((o.end for o in ops), default=1.0)
    out: list[tuple[OpId, OpId]] = []
    for (_, a, b), group in groups.items():
        kinds = sorted(o.kind for o in group)
        if kinds != ["B", "F"] or b - a <= WIRE_REL_TOL * max(1.0, scale):
            continue  # a zero-length F and B at one instant ran back to back, in the ops' list order
        f, bk = (group[0].id, group[1].id) if group[0].kind == "F" else (group[1].id, group[0].id)
        if inst.has_op(f) and inst.has_op(bk) and abs((b - a) - inst.pair_cost(f, bk)) <= WIRE_REL_TOL * max(
                1.0, scale):
            out.append((f, bk))
    return pair_map(out)


def busy_time(ops: Sequence[ScheduledOp], pairs: Pairs) -> float:
    """Device time the ops occupy, a pair counted once (so the bubble is idle time, as DualPipe counts it)."""
    total = sum(o.end - o.start for o in ops)
    return total - sum(o.end - o.start for o in ops if o.kind == "B" and o.id in pairs)



"""The rules a list policy is made of, for the V and the interleaved placements.

* admission: which slots (kind, stage) a device may start at all (a new microbatch only while fewer
  than a count are in flight; a recipe's forward sequence) and which memory allows (plain cap with
  room for the V's turn, or the banker's test of :mod:`.memory`);
* priority: which ready op runs first (a rank of kind and chunk, or oldest-microbatch with a chunk
  rule);
* W deferral: which waiting W is next and when it runs (:func:`~.engine.w_due`, ``hold``).

:func:`v_choose` and :func:`interleaved_choose` put them together into the engine's ``choose``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ...core.instance import Instance, OpId
from ...core.tolerance import within_cap
from .engine import Choose, Progress, list_choose


def v_slots(inst: Instance, rank: Sequence[str]) -> Callable[[int], Sequence[tuple[str, int]]]:
    """Device ``d``'s slots on the V placement in the priority order of ``rank``: names ``B1``, ``B0``,
    ``F1``, ``F0`` (kind, and chunk 1 = stage ``S - 1 - d`` or chunk 0 = stage ``d``); first runs first."""
    S = inst.num_stages
    table = [tuple((name[0], S - 1 - d if name[1] == "1" else d) for name in rank) for d in range(inst.devices)]
    return table.__getitem__


def new_microbatch_cap(prog: Progress, cap: Callable[[int], float]) -> Callable[[int, str, int], bool]:
    """Admission by count: a chunk-0 forward (a new microbatch on ``d``) only while fewer than ``cap(d)``
    microbatches are in flight on chunk 0 (forwards less backwards of stage ``d``)."""
    nf, nb = prog.nf, prog.nb
    return lambda d, kind, s: kind != "F" or s != d or nf[s] - nb[s] < cap(d)


def v_choose(prog: Progress, cap: Callable[[int], float], allows: Callable[[int, OpId], bool],
             rank: Sequence[str], waiting: Callable[[int], Sequence[OpId]], w: str,
             hold: int | None = None) -> Choose:
    """The V list scheduler's decision (``zb-v-greedy``, ``v-memory``)."""
    return list_choose(prog, v_slots(prog.inst, rank), new_microbatch_cap(prog, cap), allows, None, waiting, w, hold)


def room_for_turn(prog: Progress) -> Callable[[int, OpId], bool]:
    """Plain memory admission on the V: live memory plus the op's positive delta within the cap; a new
    microbatch also leaves room for a chunk-1 forward while one is still to come (the V's turn)."""
    inst, live, nf, m, S = prog.inst, prog.live, prog.nf, prog.m, prog.S
    delta, limit = inst.delta, inst.limit

    def allows(d: int, op: OpId) -> bool:
        if op.kind == "F" and op.stage == d:
            t = S - 1 - d
            need = delta["F"][d] + (max(delta["F"][t], 0.0) if nf[t] < m else 0.0)
        else:
            need = delta[op.kind][op.stage]
        return within_cap(live[d] + max(need, 0.0), limit[d])

    return allows


def bankers(prog: Progress, turn: bool = False) -> Callable[[int, OpId], bool]:
    """Banker's admission (:class:`~.memory.BankersMemory`); with ``turn`` (V only) a new microbatch
    also needs room for its own chunk-1 forward while one is still to come."""
    mem, nf, m, S = prog.mem, prog.nf, prog.m, prog.S
    delta, limit = prog.inst.delta, prog.inst.limit

    def allows(d: int, op: OpId) -> bool:
        change = delta[op.kind][op.stage]
        if mem is None or change <= 0:
            return True
        if turn and op.kind == "F" and op.stage == d and nf[S - 1 - d] < m and not within_cap(
                mem.live[d] + change + max(0.0, delta["F"][S - 1 - d]), limit[d]):
            return False
        return mem.allows(d, op.microbatch, change)

    return allows


def oldest_w(prog: Progress, stages: Callable[[int], Sequence[int]],
             key: Callable[[OpId], tuple[int, int]]) -> Callable[[int], list[OpId]]:
    """Waiting Ws as each stage's next W (Ws of a stage run in microbatch order), sorted by ``key``."""
    nw, nb, split = prog.nw, prog.nb, prog.split

    def waiting(d: int) -> list[OpId]:
        if not split:
            return []
        return sorted((OpId("W", s, nw[s]) for s in stages(d) if nw[s] < nb[s]), key=key)

    return waiting


def fifo_w(prog: Progress) -> Callable[[int], Sequence[OpId]]:
    """Waiting Ws in the order their Bs ran (needs ``Progress(fifo=True)``)."""
    ws = prog.ws
    assert ws is not None
    return ws.__getitem__


def interleaved_choose(prog: Progress, warm: list[int], seqs: list[list[tuple[int, int]]] | None,
                       follow: list[int], forward: str, alternate: bool, w: str, hold: int | None) -> Choose:
    """The interleaved memory greedy's decision (loop placement, v >= 2; :mod:`..interleaved_memory`)."""
    inst = prog.inst
    p, stages = inst.devices, inst.stages_of_device
    slots = [tuple((kind, s) for s in stages[d] for kind in ("B", "F")) for d in range(p)]
    nf, fs, bs, last = prog.nf, prog.fs, prog.bs, prog.last

    def admits(d: int, kind: str, s: int) -> bool:
        if kind != "F":
            return True
        if seqs is not None and fs[d] < follow[d] and seqs[d][fs[d]] != (s, nf[s]):
            return False  # not the device's next forward
        return not (s < p and fs[d] - bs[d] >= warm[d])  # a new microbatch waits for one in flight to go back

    def pick(d: int, ops: list[OpId]) -> OpId:
        b_ops = [o for o in ops if o.kind == "B"]
        f_ops = [o for o in ops if o.kind == "F"]
        if f_ops and b_ops and alternate and last[d] == "B":
            b_ops = []
        if b_ops:
            return min(b_ops, key=lambda o: (o.microbatch, -o.stage))
        deep = forward in ("deep", "warm-deep") or (forward == "switch" and bs[d] > 0)
        return min(f_ops, key=lambda o: (-o.stage, o.microbatch) if deep else (o.stage, o.microbatch))

    waiting = oldest_w(prog, stages.__getitem__, lambda o: (o.microbatch, -o.stage))
    return list_choose(prog, slots.__getitem__, admits, bankers(prog), pick, waiting, w, hold)


def ramp_caps(base: Sequence[int], scale: float, extra: int | None) -> list[float]:
    """In-flight caps ``max(1, round(scale * b) + extra)`` of per-device counts ``base``; None: memory alone."""
    return [math.inf if extra is None else max(1, round(scale * b) + extra) for b in base]

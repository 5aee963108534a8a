"""A rank's program: the schedule lowered to compute, send and receive-post instructions.

All ranks merge every op of the schedule into one global sequence (by start time, ties broken
by dependency position, so it is a valid execution order of the whole pipeline). Rank r walks it:
its own op becomes ``Compute`` (followed by ``Send`` when the consumer stage lives on another
rank); a peer's op whose output r consumes becomes ``PostRecv`` at that same position. Both
ends of every rank pair therefore issue their point-to-point calls in the same order (what NCCL
needs), a receive is posted when its sender produces it — early, well before the consumer op
waits on it — and no rank can block on a message whose send comes later in the sequence.
torch-free: the plan can be built and inspected without torch.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Literal

from pipesched.solver.core.instance import Instance, OpId
from pipesched.solver.core.ops import dependency_rank
from pipesched.solver.core.schedule import Schedule, ScheduledOp


@dataclass(frozen=True)
class Message:
    """A tensor crossing ranks: the output of ``op`` (activation for F, input gradient for B)."""

    op: OpId
    src: int
    dst: int
    consumer: OpId

    @property
    def direction(self) -> Literal["act", "grad"]:
        return "act" if self.op.kind == "F" else "grad"


@dataclass(frozen=True)
class Compute:
    op: OpId


@dataclass(frozen=True)
class Send:
    message: Message


@dataclass(frozen=True)
class PostRecv:
    message: Message


Instruction = Compute | Send | PostRecv


@dataclass(frozen=True)
class TwinSend:
    """Under a dual placement, after the step: send gradient bucket ``bucket`` to the twin rank ``peer``."""

    peer: int
    bucket: int


@dataclass(frozen=True)
class TwinRecv:
    """Receive the twin's gradient bucket ``bucket`` from ``peer``."""

    peer: int
    bucket: int


def twin_exchange(rank: int, devices: int, buckets: int) -> list[TwinSend | TwinRecv]:
    """The twin gradient sum's point-to-point calls in posting order (:mod:`.twins`).

    Per bucket the lower rank of the pair sends first and the higher one receives first, so both post
    the pair's calls in the same order: NCCL pairs a send with the peer's receive by posting order, runs
    one pair's calls in that order, and a send does not complete before its receive is posted; were
    both twins to send first, each would wait for the other's receive (gloo buffers sends and would
    not show it).
    """
    peer = devices - 1 - rank
    out: list[TwinSend | TwinRecv] = []
    for j in range(buckets):
        pair: list[TwinSend | TwinRecv] = [TwinSend(peer, j), TwinRecv(peer, j)]
        out += pair if rank < peer else pair[::-1]
    return out


def prev_stage(inst: Instance, stage: int, microbatch: int) -> int | None:
    """The stage whose F feeds ``stage``'s F for ``microbatch`` (None: the first of its chain).

    Read from the instance's dependencies, so every placement's chain follows: ``s - 1`` for loop
    and V, and within one copy for dual (the up copy's first stage has no predecessor).
    """
    return next((op.stage for op, _ in inst.predecessors(OpId("F", stage, microbatch)) if op.kind == "F"), None)


def next_stage(inst: Instance, stage: int, microbatch: int) -> int | None:
    """The stage whose F reads ``stage``'s output for ``microbatch`` (None: the last, with the loss)."""
    return next((op.stage for op, _ in inst.successors(OpId("F", stage, microbatch)) if op.kind == "F"), None)


def consumer_of(inst: Instance, op: OpId) -> OpId | None:
    """The op on the next stage of the chain that reads ``op``'s output: F -> the next stage's F,
    B -> the previous stage's B; W (and the chain's ends) -> None."""
    if op.kind == "F":
        nxt = next_stage(inst, op.stage, op.microbatch)
        return OpId("F", nxt, op.microbatch) if nxt is not None else None
    if op.kind == "B":
        prev = prev_stage(inst, op.stage, op.microbatch)
        return OpId("B", prev, op.microbatch) if prev is not None else None
    return None


def global_sequence(schedule: Schedule) -> list[OpId]:
    """Every op once, in an order that respects each device's order and every dependency.

    A merge of the per-device orders of :meth:`Schedule.order` (so zero-cost ops at one instant run in
    the order the schedule, its memory check and the torch CSV give them), taking the earliest op among
    the devices' next ones; ties across devices go to the op earlier in its microbatch's chain.
    """
    stages = schedule.problem.num_stages
    timed = {o.id: o for o in schedule.ops}

    def key(op: OpId) -> tuple[float, float, int, int]:
        o = timed[op]
        return (o.start, o.end, dependency_rank(op, stages), o.device)

    return list(heapq.merge(*(_forward_first(order, timed) for order in schedule.order()), key=key))


def _forward_first(order: list[OpId], timed: dict[OpId, ScheduledOp]) -> list[OpId]:
    """A device's order with each overlapped pair (``costs.overlap_fb``: an F and a B sharing one
    positive interval, which no two other ops of a device can) as its F, then its B.

    The runtime has one stream per rank, so a pair runs as two ops in sequence. The halves are
    independent (different microbatches or chunks), so either order gives the same gradients; F
    first is the order the validator's memory model assumes (F's delta from the pair's start, B's
    at its end) and the one the global merge's tie-break expects.
    """
    out = list(order)
    for k in range(len(out) - 1):
        a, b = timed[out[k]], timed[out[k + 1]]
        if a.kind == "B" and b.kind == "F" and (a.start, a.end) == (b.start, b.end) and a.end > a.start:
            out[k], out[k + 1] = out[k + 1], out[k]
    return out


def rank_plan(schedule: Schedule, rank: int, inst: Instance | None = None) -> list[Instruction]:
    """The instruction list rank ``rank`` executes for one training step."""
    inst = inst or Instance.from_problem(schedule.problem)
    plan: list[Instruction] = []
    for op in global_sequence(schedule):
        src = inst.device(op)
        consumer = consumer_of(inst, op)
        dst = inst.device(consumer) if consumer is not None else src
        message = Message(op, src, dst, consumer) if consumer is not None and dst != src else None
        if src == rank:
            plan.append(Compute(op))
            if message is not None:
                plan.append(Send(message))
        elif message is not None and dst == rank:
            plan.append(PostRecv(message))
    return plan

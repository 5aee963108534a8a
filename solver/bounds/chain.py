"""Heads and tails of every (kind, stage) class along one microbatch's dependency chain: the
release times and delivery times the one-machine bounds (:mod:`.analytic`, :mod:`.shared_cap`,
:mod:`.held_w`) share."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.instance import Instance, OpId


@dataclass(frozen=True)
class OpClass:
    """All ``m`` ops of one (kind, stage): same device, duration, head and tail."""

    op: OpId  # microbatch 0 stands for the class
    duration: float
    head: float  # earliest start from time 0 along the microbatch's chain
    tail: float  # least time from its end to the end of its microbatch's last op


def op_classes(inst: Instance) -> list[OpClass]:
    """Heads and tails of every class, from the one dependency chain of a microbatch."""
    S = inst.num_stages
    chain = [OpId("F", s, 0) for s in range(S)] + [OpId("B", s, 0) for s in reversed(range(S))]
    head: dict[OpId, float] = {}
    t = 0.0
    for k, op in enumerate(chain):
        if k > 0:
            prev = chain[k - 1]
            t += inst.cost(prev) + (inst.link(prev.stage, op.stage) if prev.kind == op.kind else 0.0)
        head[op] = t
    if inst.split_backward:
        for s in range(S):
            head[OpId("W", s, 0)] = head[OpId("B", s, 0)] + inst.duration["B"][s]
    end = {op: head[op] + inst.cost(op) for op in head}
    # tail: latest end among the op's descendants (the chain after it and the Ws hanging off it)
    tail: dict[OpId, float] = {}
    latest = float("-inf")
    for op in reversed(chain):
        tail[op] = max(latest, end[op]) - end[op]
        latest = max(latest, end[op])
        if inst.split_backward and op.kind == "B":
            latest = max(latest, end[OpId("W", op.stage, 0)])
            tail[op] = latest - end[op]
    for s in range(S) if inst.split_backward else ():
        tail[OpId("W", s, 0)] = 0.0
    return [OpClass(op, inst.cost(op), head[op], tail[op]) for op in head]

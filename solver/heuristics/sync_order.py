"""W orders that let the gradient syncs start early (a step with a tail: :mod:`pipesched.solver.core.step`).

Why: a stage's gradient sync starts once its last W ends, so a schedule that defers every W to the end
(zero-bubble style) leaves every stage's sync exposed after the pipeline; with ``v >= 2`` the chunk whose
backward finishes first could sync under the other chunk's remaining work. From each order found, two
variants, each kept only when it fits the memory cap and its step is shorter:

- *W slots by readiness*: the device's Ws keep their places in the order, but the places are given to
  stages in the order their last B runs (microbatch order within a stage), so the stage that can sync
  first finishes its Ws first;
- *early stage*: additionally, the Ws of the stage whose last B runs first are pulled to right after that
  B, ahead of the device's remaining ops (its sync then overlaps all of them; the ops it passes wait).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from ..core.instance import Instance, OpId
from ..core.schedule import Order
from ..timing.retime import Incumbent
from ..timing.simulate import DeadlockError
from .search import Search
from .swap_past_w import fits_memory


def _last_b(ops: list[OpId]) -> dict[int, int]:
    """Per stage, the position of its last B in a device's order."""
    out: dict[int, int] = {}
    for k, op in enumerate(ops):
        if op.kind == "B":
            out[op.stage] = k
    return out


def by_readiness(order: Order) -> Order:
    """Each device's W places filled, in turn, with the available W (its B already placed) of the stage
    whose last B runs first (microbatch order within a stage); the original order had an available W
    at every place, so there always is one."""
    out = []
    for ops in order:
        last = _last_b(ops)
        pool: list[tuple[int, int, OpId]] = []
        row = []
        for op in ops:
            if op.kind == "B":
                heapq.heappush(pool, (last[op.stage], op.microbatch, OpId("W", op.stage, op.microbatch)))
            if op.kind == "W":
                row.append(heapq.heappop(pool)[2])
            else:
                row.append(op)
        out.append(row)
    return out


def early_stage(order: Order) -> Order:
    """:func:`by_readiness`, then the first-ready stage's remaining Ws right after its last B."""
    out = []
    for ops in by_readiness(order):
        last = _last_b(ops)
        if len(last) < 2:  # one stage on the device: nothing to overlap its sync with
            out.append(ops)
            continue
        stage = min(last, key=lambda s: last[s])
        at = last[stage]
        pulled = [op for op in ops[at + 1:] if op.kind == "W" and op.stage == stage]
        rest = [op for op in ops[at + 1:] if not (op.kind == "W" and op.stage == stage)]
        out.append(ops[:at + 1] + pulled + rest)
    return out


def variants(inst: Instance, order: Order) -> list[Incumbent]:
    """The variants of ``order`` that fit the cap, timed (an unchanged or deadlocking one is dropped)."""
    found = []
    for make in (by_readiness, early_stage):
        new = make(order)
        if new == order or not all(fits_memory(inst, ops, d) for d, ops in enumerate(new)):
            continue
        try:
            found.append(Incumbent.of(inst, new))
        except DeadlockError:
            continue
    return found


@dataclass(frozen=True)
class SyncOrderPhase:
    """The variants of every order found, when the step has a gradient sync (cheap: a few timings)."""

    name: str = "sync-aware W order"
    wall_net: bool = False

    def applies(self, s: Search) -> bool:
        return bool(s.inst.sync) and any(s.inst.sync) and bool(s.found) and s.inst.split_backward

    def estimate(self, s: Search) -> float:
        return 0.0

    def allowance(self, s: Search) -> float:
        return 0.0

    def run(self, s: Search) -> None:
        s.keep([(f"{name}+sync-order[{k}]", inc) for name, found in list(s.found)
                for k, inc in enumerate(variants(s.inst, found.order))])

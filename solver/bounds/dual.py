"""Lower bounds for the dual placement (DualPipe, docs/dualpipe.md), from the bounds of its copies.

Why a reduction instead of new bounds: under ``placement: "dual"`` each microbatch runs through one
copy of the model only (stages ``0..p-1`` downward, ``p..2p-1`` upward), so the chain arguments of
:mod:`.analytic` and :mod:`.combinatorial` (one chain through every stage) do not hold for the whole
problem. But a dual schedule restricted to one copy's ops is a schedule of that copy alone
(:meth:`Instance.directions`: ``p`` stages, one per device, its own microbatches): dropping ops
never lengthens a device's window, and, when no microbatch ever holds negative memory, never raises
memory either. So any bound of a copy bounds the dual problem. What the copies miss is that each
device runs both: :func:`shared_device_bound` adds that, one device at a time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from ..core.instance import Instance


def _arrival_and_drain(inst: Instance) -> tuple[list[float], list[float]]:
    """Per stage id: earliest F start (the forward chain before it in its copy, with comm) and the least
    time from its B's end to the end of its copy's first-stage B (the backward chain below it)."""
    arrive = [0.0] * inst.num_stages
    drain = [0.0] * inst.num_stages
    for s in range(inst.num_stages):
        first, _ = inst.copy_range(s)
        if s > first:
            arrive[s] = arrive[s - 1] + inst.duration["F"][s - 1] + inst.link(s - 1, s)
            drain[s] = drain[s - 1] + inst.duration["B"][s - 1] + inst.link(s, s - 1)
    return arrive, drain


def shared_device_bound(inst: Instance) -> float:
    """One device, both copies: every op of device ``d`` starts no earlier than the earliest forward
    arrival among its stages that have microbatches and (fused backward) is followed by the least
    backward drain among them, so ``makespan >= min head + work(d) + min tail``; a span is at least
    the work."""
    arrive, drain = _arrival_and_drain(inst)
    work = inst.device_work()
    best = 0.0
    for d, stages in enumerate(inst.stages_of_device):
        busy = [s for s in stages if inst.stage_microbatches(s)]
        if not busy:
            continue
        if inst.objective == "stage_span":
            best = max(best, work[d])
            continue
        tail = 0.0 if inst.split_backward else min(drain[s] for s in busy)
        best = max(best, min(arrive[s] for s in busy) + work[d] + tail)
    return best


def _natural(inst: Instance) -> bool:
    """No microbatch ever holds negative memory on any stage (levels after F and after B >= 0)."""
    for s in range(inst.num_stages):
        l1 = inst.delta["F"][s]
        if l1 < 0 or (inst.split_backward and l1 + inst.delta["B"][s] < 0):
            return False
    return True


def copies_for_bounds(inst: Instance) -> list[Instance]:
    """The two copies as instances whose bounds are valid for ``inst``: with their caps dropped when some
    stage can hold negative memory (then the other copy could make room, and the copy's cap would not be
    a relaxation)."""
    copies = inst.directions()
    if _natural(inst):
        return copies
    return [replace(c, limit=(math.inf,) * c.devices) for c in copies]


def dual_bound(inst: Instance, per_copy: Callable[[Instance], float]) -> float:
    """The best of ``per_copy`` on each copy and :func:`shared_device_bound`."""
    return max([shared_device_bound(inst), *(per_copy(c) for c in copies_for_bounds(inst))])

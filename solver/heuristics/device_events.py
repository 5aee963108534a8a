"""The event loop of the list schedulers: each device, when it frees, starts the op its rule picks.

Shared by the V greedy (:mod:`.v_greedy`) and the interleaved memory greedy
(:mod:`.interleaved_memory`), which differ only in their rule (``choose``) and in the state an op
changes (``commit``). A device's pending event is invalidated by a version number whenever an op on
it or on a neighbour may change what it can start, so the heap never holds stale choices.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable

from ..core.instance import OpId

#: ``choose(d)``: (when device ``d`` can start its next op, the op), or (when to look again, None),
#: or (inf, None) when nothing will ever be ready without another device's progress.
Choose = Callable[[int], tuple[float, OpId | None]]
#: ``commit(d, start, op)``: record ``op`` started on ``d`` at ``start``; (its end, the devices whose
#: choice it may change, ``d`` among them).
Commit = Callable[[int, float, OpId], tuple[float, set[int]]]


def run_device_events(devices: int, free: list[float], choose: Choose, commit: Commit) -> int:
    """Run the devices' events in time order until none is left; the number of ops started.
    ``free[d]`` (when device ``d`` is next free) is read by ``choose`` and kept here."""
    heap: list[tuple[float, int, int]] = []
    version = [0] * devices

    def push(d: int) -> None:
        version[d] += 1
        when, _ = choose(d)
        if when < math.inf:
            heapq.heappush(heap, (max(when, free[d]), d, version[d]))

    for d in range(devices):
        push(d)
    done = 0
    while heap:
        when, d, ver = heapq.heappop(heap)
        if ver != version[d]:
            continue
        free[d] = max(free[d], when)
        at, op = choose(d)
        if op is None:
            if at < math.inf:
                heapq.heappush(heap, (max(at, free[d]), d, version[d]))
            continue
        free[d], touched = commit(d, at, op)
        done += 1
        for e in sorted(touched):
            push(e)
    return done

"""Re-time a schedule's order when its ranks share fewer cores than there are ranks.

The contention factor ``f`` (:func:`pipesched.runtime.contention.contention_factor`) is measured with
every rank computing at once, so multiplying every op by it assumes all ``p`` ranks are always
busy. In a pipeline they are not: in the ramp-up, the drain and every bubble fewer ranks compete,
and those run faster. This model gives the ranks ``C`` cores instead, and whenever ``k`` ranks are
busy each runs at speed ``min(1, C / k)`` (processor sharing). ``C`` is either the cores the process
may run on (:func:`usable_cores`, :func:`cores_makespan`: what the fidelity benchmark predicts with
when ranks outnumber cores) or ``p / f`` (:func:`shared_cores_makespan`: the factor read as a
count of cores; the 192-wide kernel behind ``f`` measured 1.67 for 4 ranks on 2 cores, so it
credits the ranks with more cores than the machine has and under-predicts: docs/costs.md). The schedule's per-device order and its
dependencies (with ``comm`` after a cross-device edge) are replayed event by event under that rule;
the result is the step that order takes on the shared machine. With ``f = 1`` it is the schedule's
own makespan (a paired F&B runs as its two ops in sequence, as the CPU runtime does).

torch-free: it reads only the schedule.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence

from pipesched.solver.core.instance import Instance, OpId
from pipesched.solver.core.schedule import Schedule

_EPS = 1e-12


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity mask, which a container or ``taskset`` narrows;
    ``os.cpu_count()`` counts the whole machine)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def shared_cores_makespan(schedule: Schedule, contention: float) -> float:
    """The makespan of ``schedule``'s per-device order when its ``p`` ranks share ``p / contention``
    cores (``contention >= 1``), each of ``k`` busy ranks running at ``min(1, cores / k)``."""
    if contention < 1.0 or not math.isfinite(contention):
        raise ValueError(f"contention must be a finite factor >= 1 (got {contention})")
    return cores_makespan(schedule, schedule.problem.devices / contention)


def cores_makespan(schedule: Schedule, cores: float) -> float:
    """The makespan of ``schedule``'s per-device order when its ranks share ``cores`` cores (> 0),
    each of ``k`` busy ranks running at ``min(1, cores / k)``."""
    if not cores > 0 or not math.isfinite(cores):
        raise ValueError(f"cores must be a finite number > 0 (got {cores})")
    return _replay(schedule, lambda k: min(1.0, cores / k))


def curve_makespan(schedule: Schedule, slowdown: Sequence[float]) -> float:
    """The makespan of ``schedule``'s per-device order when each of ``k`` busy ranks runs
    ``slowdown[k - 1]`` times slower than alone (a measured curve,
    :func:`pipesched.runtime.contention.slowdown_curve`; the last entry for larger ``k``)."""
    if not slowdown or any(not (x >= 1.0 and math.isfinite(x)) for x in slowdown):
        raise ValueError(f"slowdown must be finite factors >= 1, one per count of busy ranks (got {list(slowdown)})")
    return _replay(schedule, lambda k: 1.0 / slowdown[min(k, len(slowdown)) - 1])


def _replay(schedule: Schedule, speed_of: Callable[[int], float]) -> float:
    """Event-by-event replay of the per-device order, each running op at ``speed_of(k)`` while ``k``
    ops run."""
    inst = Instance.from_problem(schedule.problem)
    p = inst.devices
    order = schedule.order()
    end: dict[OpId, float] = {}
    nxt = [0] * p  # index of each device's next op
    running: dict[int, tuple[OpId, float]] = {}  # device -> (op, remaining work)
    t = 0.0
    total = sum(len(o) for o in order)
    while len(end) < total:
        # start every op whose device is free and whose inputs have arrived by t
        waits: list[float] = []
        for d in range(p):
            if d in running or nxt[d] >= len(order[d]):
                continue
            op = order[d][nxt[d]]
            ready = _ready(inst, op, end)
            if ready is None:
                continue  # a predecessor has not ended yet
            if ready <= t + _EPS:
                running[d] = (op, inst.cost(op))
                nxt[d] += 1
            else:
                waits.append(ready)
        if not running and not waits:
            raise ValueError("the schedule's order deadlocks: no op can start")
        speed = speed_of(len(running)) if running else 1.0
        step = min([rem / speed for _, rem in running.values()] + [w - t for w in waits])
        t += step
        for d, (op, rem) in list(running.items()):
            rem -= step * speed
            if rem <= _EPS:
                end[op] = t
                del running[d]
            else:
                running[d] = (op, rem)
    return t


def _ready(inst: Instance, op: OpId, end: dict[OpId, float]) -> float | None:
    """When ``op``'s inputs are there (its predecessors' ends + lags), or None if one has not ended."""
    ready = 0.0
    for pred, lag in inst.predecessors(op):
        if pred not in end:
            return None
        ready = max(ready, end[pred] + lag)
    return ready

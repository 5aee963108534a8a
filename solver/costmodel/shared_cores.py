"""Re-time a schedule's order when its ranks share fewer cores than there are ranks.

The contention factor ``f`` (:func:`pipesched.runtime.profiling.contention.contention_factor`) is measured with
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
from pipesched.solver.timing.simulate import DeadlockError, Sharing, simulate


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


def curve_makespan(schedule: Schedule, slowdown: Sequence[float], handoff: Sequence[float] | None = None) -> float:
    """The makespan of ``schedule``'s per-device order when each of ``k`` busy ranks runs
    ``slowdown[k - 1]`` times slower than alone (a measured curve,
    :func:`pipesched.runtime.profiling.contention.slowdown_curve`; the last entry for larger ``k``).

    ``handoff[j]`` (ms, optional; :func:`pipesched.runtime.profiling.contention.handoff_curve`): how much later
    than on an idle machine a rank starts an op whose input another rank just sent, when ``j`` other
    ranks are computing at that moment (the woken rank must get a core back). Added to every
    cross-device edge, indexed by the ranks still computing when the producer ends."""
    if not slowdown or any(not (x >= 1.0 and math.isfinite(x)) for x in slowdown):
        raise ValueError(f"slowdown must be finite factors >= 1, one per count of busy ranks (got {list(slowdown)})")
    if handoff is not None and (not handoff or any(not (x >= 0.0 and math.isfinite(x)) for x in handoff)):
        raise ValueError(f"handoff must be finite delays >= 0, one per count of other busy ranks (got {list(handoff)})")
    return _replay(schedule, lambda k: 1.0 / slowdown[min(k, len(slowdown)) - 1],
                   None if handoff is None else (lambda j: handoff[min(j, len(handoff) - 1)]))


def _replay(schedule: Schedule, speed_of: Callable[[int], float],
            handoff_of: Callable[[int], float] | None = None) -> float:
    """The end of the per-device order's replay (the solver's simulator under :class:`Sharing`)."""
    inst = Instance.from_problem(schedule.problem)
    ends: dict[OpId, float] = {}
    try:
        simulate(inst, schedule.order(), sharing=Sharing(speed_of, handoff_of), ends=ends)
    except DeadlockError as e:
        raise ValueError(f"the schedule's order deadlocks: {e}") from None
    return max(ends.values(), default=0.0)

"""Recompute transients for methods that do not model them: keep each device's largest back.

A transient (``memory.backward_input_transient``) is memory live only while a stage's B runs, e.g.
the forward activations activation checkpointing re-materialises (issue 10). The validator, the
reported peaks and the Gantt memory track see it exactly (:meth:`Instance.surge`). A method that
schedules against ``Instance.limit`` without it stays valid when that limit keeps back the device's
largest transient: ops on a device never overlap, so at most one B, and one transient, is live at a
time, and the true peak is at most the scheduled level plus that transient. Instances therefore carry
the reduced ``limit`` beside the problem's ``cap``; a solve under the reduced limit proves neither
optimality nor infeasibility of the problem itself, so :func:`pipesched.solver.timing.finalize`
reports such proofs as ``feasible`` / ``timeout`` and takes its closed-form bound from
:meth:`Instance.relaxed`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .problem import Problem


def reserve_transients(limit: tuple[float, ...], transient: tuple[float, ...],
                       device_of_stage: Sequence[int]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``(cap, limit)``: the problem's limits and the limits methods schedule against (``cap`` is empty
    when nothing is kept back: no transient, or no finite limit)."""
    if not transient or all(math.isinf(x) for x in limit):
        return (), limit
    largest = [0.0] * len(limit)
    for s, t in enumerate(transient):
        d = device_of_stage[s]
        largest[d] = max(largest[d], t)
    return limit, tuple(x - k if math.isfinite(x) else x for x, k in zip(limit, largest, strict=True))


def reserves_transients(problem: Problem) -> bool:
    """Whether methods solve ``problem`` under limits reduced by its transients."""
    t = problem.memory.backward_input_transient
    return problem.memory.limit is not None and (any(x > 0 for x in t) if isinstance(t, list) else t > 0)

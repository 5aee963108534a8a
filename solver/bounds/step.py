"""Lower bounds on a step with a tail (gradient syncs, optimizer: :mod:`pipesched.solver.core.step`).

Per device ``d`` (times measured from 0 for the makespan, from the device's first op for a span):

- its last op ends no earlier than its first op can start (``h_d``, makespan only) plus all its work,
  and it is its stage's last W (B when fused), so one of its stages' syncs and the optimizer follow:
  ``h_d + work_d + min_s g_s + o_d``;
- each stage's sync is ready no earlier than ``r_s``: its own ops one after another
  (``m_s (F + B + W)``) or one microbatch's round trip from its forward; the lane finishes no earlier
  than the earliest-release-date schedule of those lower releases (lane completion only grows with
  the releases), then the optimizer: ``max_k (r_(k) + Σ_{j >= k} g_(j)) + o_d``, releases sorted;
- the pipeline bound ``P`` (the last op ends at ``P`` or later, on some device whose stage's sync and
  optimizer then follow): ``P + min_d (min_s g_s + o_d)``.
"""

from __future__ import annotations

from ..core.instance import Instance
from .analytic import forward_arrival, round_trip


def _lane_end(releases: list[tuple[float, float]]) -> float:
    """When one lane can finish jobs ``(release, length)``: the earliest-release-date schedule."""
    t = 0.0
    for r, g in sorted(releases):
        t = max(t, r) + g
    return t


def step_bound(inst: Instance, pipeline: float) -> float:
    """The best of the bounds above, given the pipeline's own bound ``pipeline`` (same objective)."""
    work_inst = inst.without_overlap()  # F&B pairs shorten a device's work: bound the pair-free relaxation
    work = work_inst.device_work()
    span = inst.objective == "stage_span"
    arrive = [0.0] * inst.num_stages if inst.dual else forward_arrival(inst)
    least_tail = min(min((inst.sync[s] for s in stages), default=0.0) + inst.optimizer[d]
                     for d, stages in enumerate(inst.stages_of_device))
    best = pipeline + least_tail
    kinds = work_inst.kinds
    for d, stages in enumerate(inst.stages_of_device):
        if not stages:
            continue
        head = 0.0 if span else min(arrive[s] for s in stages)
        best = max(best, head + work[d] + min(inst.sync[s] for s in stages) + inst.optimizer[d])
        releases = []
        for s in stages:
            own = len(inst.stage_microbatches(s)) * sum(work_inst.duration[k][s] for k in kinds)
            trip = 0.0 if inst.dual else round_trip(work_inst, s)
            offset = arrive[s] - head if not span else 0.0
            releases.append((offset + head + max(own, trip), inst.sync[s]))
        best = max(best, _lane_end(releases) + inst.optimizer[d])
    return best

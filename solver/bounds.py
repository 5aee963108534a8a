"""Analytic lower bounds on the objective, valid for every schedule of a problem.

Makespan: each device must do all its work, cannot start before the first of its forwards can
arrive (the ramp-up ``head``), and when backward is fused its last op is a B of its lowest stage,
after which the rest of that microbatch's backward chain must still run elsewhere (``tail``).
One microbatch's full dependency chain is a bound too.

Stage span: a device's span holds all its work, and the round trip of the microbatch it starts
with: from that F on its stage through the rest of the model and back to that stage's B (and W).
"""

from __future__ import annotations

from .instance import Instance


def forward_arrival(inst: Instance) -> list[float]:
    """Earliest start of F(s, i) for any i: the forward chain of stages before s, with comm."""
    out = [0.0]
    for s in range(1, inst.num_stages):
        out.append(out[-1] + inst.duration["F"][s - 1] + inst.link(s - 1, s))
    return out


def backward_drain(inst: Instance) -> list[float]:
    """Least time after B(s, i) ends until B(0, i) ends: the backward chain below s, with comm."""
    out = [0.0] * inst.num_stages
    for s in range(1, inst.num_stages):
        out[s] = out[s - 1] + inst.duration["B"][s - 1] + inst.link(s, s - 1)
    return out


def round_trip(inst: Instance, stage: int) -> float:
    """Least time from F(stage, i) starting to the last backward op of (stage, i) ending."""
    last = inst.num_stages - 1
    t = 0.0
    for s in range(stage, last + 1):
        t += inst.duration["F"][s] + inst.duration["B"][s]
        if s < last:
            t += 2 * inst.link(s, s + 1)
    if inst.split_backward:
        t += inst.duration["W"][stage]
    return t


def makespan_lower_bound(inst: Instance) -> float:
    arrive = forward_arrival(inst)
    drain = backward_drain(inst)
    work = inst.device_work()
    best = round_trip(inst, 0)  # one microbatch's whole dependency chain
    for d, stages in enumerate(inst.stages_of_device):
        if not stages:
            continue
        head = min(arrive[s] for s in stages)
        tail = 0.0 if inst.split_backward else drain[min(stages)]
        best = max(best, head + work[d] + tail)
    return best


def stage_span_lower_bound(inst: Instance) -> float:
    work = inst.device_work()
    best = 0.0
    for d, stages in enumerate(inst.stages_of_device):
        if stages:
            best = max(best, work[d], min(round_trip(inst, s) for s in stages))
    return best


def lower_bound(inst: Instance) -> float:
    """The analytic bound for the problem's own objective."""
    if inst.objective == "stage_span":
        return stage_span_lower_bound(inst)
    return makespan_lower_bound(inst)

"""Where a training step ends: after the pipeline's ops, each device's gradient syncs and optimizer step.

In a data-parallel job a step ends when the slowest device has synchronised its stages' gradients and
stepped its optimizer, not at the last pipeline op (``costs.grad_sync``, ``costs.optimizer``):

- stage ``s``'s sync becomes ready when its last W ends (its last B with a fused backward);
- a device's syncs run on one lane, one at a time: in order of readiness (ties by stage), each as soon
  as it is ready and the lane is free. That order is optimal: it is the earliest-release-date rule,
  which minimises when a single lane finishes a set of jobs with release times;
- the device's optimizer step starts when its syncs and its ops are done.

The step ends at the latest optimizer end; a device's span (the ``stage_span`` objective) runs from its
first op to its optimizer end. Given the ops' times the tail is fixed, so methods choose the ops' times
and this module adds the tail (a schedule reports it, the validator re-checks it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .instance import Instance, OpId


@dataclass(frozen=True)
class StepTail:
    """The syncs ``(device, stage, start, end)``, in lane order per device, and the optimizer steps
    ``(device, start, end)``, one per device."""

    syncs: tuple[tuple[int, int, float, float], ...]
    steps: tuple[tuple[int, float, float], ...]

    @property
    def end(self) -> float:
        return max((e for _, _, e in self.steps), default=0.0)

    def device_ends(self) -> list[float]:
        return [e for _, _, e in self.steps]


def last_kind(inst: Instance) -> str:
    """The op whose end makes a stage's gradients ready: W, or B when the backward is fused."""
    return "W" if inst.split_backward else "B"


def step_tail(inst: Instance, ends: Mapping[OpId, float] | Iterable[tuple[OpId, float]]) -> StepTail:
    """The tail of a step whose ops end at ``ends`` (see the module docstring)."""
    kind = last_kind(inst)
    ready = [0.0] * inst.num_stages
    last = [0.0] * inst.devices
    home = inst.device_of_stage
    for op, end in ends.items() if isinstance(ends, Mapping) else ends:
        d = home[op.stage]
        if end > last[d]:
            last[d] = end
        if op.kind == kind and end > ready[op.stage]:
            ready[op.stage] = end
    syncs = []
    steps = []
    for d, stages in enumerate(inst.stages_of_device):
        lane = 0.0
        for s in sorted(stages, key=lambda s: (ready[s], s)):
            begin = max(lane, ready[s])
            lane = begin + (inst.sync[s] if inst.sync else 0.0)
            syncs.append((d, s, begin, lane))
        begin = max(lane, last[d])
        steps.append((d, begin, begin + inst.optimizer[d]))
    return StepTail(tuple(syncs), tuple(steps))


def op_ends(inst: Instance, start: Mapping[OpId, float]) -> Iterable[tuple[OpId, float]]:
    """Each op's end when it starts at ``start`` and runs alone (no F&B pair)."""
    duration = inst.duration
    return ((op, t + duration[op.kind][op.stage]) for op, t in start.items())

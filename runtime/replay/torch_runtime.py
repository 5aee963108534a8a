"""Run a pipesched schedule in torch's own ``_PipelineScheduleRuntime`` via the exported CSV.

This is the path a torchtitan user takes (``pipeline_parallel_schedule_csv``); the tests use it to
prove the export is right (gradients match the reference) and the benchmark to compare step times.
Facts about torch 2.13 worth knowing: a ``compute_only`` CSV is lowered by torch (SEND/RECV and a
REDUCE_GRAD that divides by m when ``scale_grads=True``, exact for equal microbatches only); the
first stage's I is a no-op and its whole backward runs at W.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

from pipesched.solver.core.schedule import Schedule
from pipesched.solver.formats.torch_csv import to_torch_csv


def torch_schedule(schedule: Schedule, stages: Mapping[int, nn.Module],
                   loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                   group: dist.ProcessGroup | None = None) -> _PipelineScheduleRuntime:
    """torch's runtime for this rank's ``stages``, with the schedule loaded from its CSV export."""
    num_stages = schedule.problem.num_stages
    device = next(iter(stages.values())).parameters().__next__().device
    pipeline_stages = [PipelineStage(m, s, num_stages, device, group=group) for s, m in sorted(stages.items())]
    runtime = _PipelineScheduleRuntime(pipeline_stages, schedule.problem.microbatches, loss_fn=loss_fn,
                                       scale_grads=True)
    fd, path = tempfile.mkstemp(suffix=".csv", prefix="pipesched-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(to_torch_csv(schedule))
        runtime._load_csv(path, format="compute_only")
    finally:
        os.unlink(path)
    return runtime


def torch_step(runtime: _PipelineScheduleRuntime, stages: Mapping[int, nn.Module], num_stages: int,
               inputs: torch.Tensor, targets: torch.Tensor) -> None:
    """One step: inputs go to the rank holding stage 0, targets to the one holding the last stage."""
    args = (inputs,) if 0 in stages else ()
    kwargs = {"target": targets} if num_stages - 1 in stages else {}
    runtime.step(*args, **kwargs)

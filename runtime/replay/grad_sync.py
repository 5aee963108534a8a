"""The end of a data-parallel step: each stage's gradient all-reduce, started once its last W (B when
fused) has run on this rank, then the optimizer step (what ``costs.grad_sync`` and ``costs.optimizer``
model, :mod:`pipesched.solver.core.step`).

Each stage's gradients are summed over the data-parallel group asynchronously, in the order the stages
become ready, so a stage's sync overlaps the rank's remaining ops; after the last op every sync is
waited for (bounded by the executor's timeout) and the sums are divided by the group's size: ``.grad``
then holds the mean over the replicas, as DistributedDataParallel leaves it (zero the gradients before
each step, as with DDP).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn

from ..errors import PipelineError, PipelineTimeoutError


class GradSync:
    """Asynchronous all-reduces of each stage's gradients over ``group`` (the data-parallel ranks
    holding this pipeline rank's stages)."""

    def __init__(self, params: Mapping[int, Sequence[nn.Parameter]], group: dist.ProcessGroup, rank: int,
                 timeout_s: float) -> None:
        self.params = params
        self.group = group
        self.size = dist.get_world_size(group)
        self.rank = rank
        self.timeout = timedelta(seconds=timeout_s)
        self.pending: list[tuple[int, dist.Work]] = []
        self.synced: list[torch.Tensor] = []

    def start(self) -> None:
        self.pending, self.synced = [], []

    def ready(self, stage: int) -> None:
        """Stage ``stage``'s gradients are final for this step: start their all-reduce."""
        for p in self.params.get(stage, ()):
            if p.grad is None:  # unused this step: its replicas may have one, so take part with zeros
                p.grad = torch.zeros_like(p)
            try:
                self.pending.append((stage, dist.all_reduce(p.grad, group=self.group, async_op=True)))
            except RuntimeError as e:
                raise PipelineError(f"rank {self.rank}: starting the gradient sync of stage {stage} failed "
                                    f"(a data-parallel peer died?): {str(e).splitlines()[0]}") from e
            self.synced.append(p.grad)

    def finish(self) -> None:
        """Wait for every sync and turn the sums into means."""
        for stage, work in self.pending:
            try:
                ok = work.wait(self.timeout)
            except RuntimeError as e:
                raise PipelineError(f"rank {self.rank}: the gradient sync of stage {stage} failed "
                                    f"(a data-parallel peer died?): {str(e).splitlines()[0]}") from e
            if ok is False:
                raise PipelineTimeoutError(f"rank {self.rank}: the gradient sync of stage {stage} timed out "
                                           f"after {self.timeout.total_seconds():g} s")
        for g in self.synced:
            g.div_(self.size)
        self.pending, self.synced = [], []

"""The twin weight-gradient sum of a dual placement (DualPipe): ranks r and p−1−r hold the same layers.

Under ``placement: "dual"`` (docs/dualpipe.md) the model has p stages and lives twice: rank r runs
stage id r of the downward copy (model stage r) and stage id 2p−1−r of the upward copy (model stage
p−1−r), so rank r and its peer p−1−r hold the same two model stages, each having seen half of the
microbatches. Like the data-parallel all-reduce, the sum sits outside the schedule, after the
step's last op: each rank sends the peer its gradients of the step (both model stages, flattened in
model-stage order, one message each way) and adds what it receives. Addition is commutative, so
both twins end with bit-identical gradients and their optimizers stay in step.

Gradients accumulated before the step (no ``zero_grad`` in between) are kept out of the exchange:
only this step's contribution is summed, so accumulation across steps stays exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn

from .errors import PipelineError, PipelineTimeoutError

#: Tag of the twin exchange, above every message tag of a step (see :func:`comm.message_tag`).
TWIN_TAG = 2**30


def model_stage(stage: int, devices: int) -> int:
    """The model stage a dual stage id runs: ``s`` for the downward copy, ``s − p`` for the upward one."""
    return stage - devices if stage >= devices else stage


class TwinSum:
    """Per rank of a dual placement: remember the gradients before a step, sum the step's with the twin's."""

    def __init__(self, stages: Mapping[int, nn.Module], devices: int, rank: int, group: dist.ProcessGroup | None,
                 timeout_s: float) -> None:
        self.peer = devices - 1 - rank
        self.rank = rank
        self.group = group
        self.timeout = timedelta(seconds=timeout_s)
        by_model = sorted(stages, key=lambda s: model_stage(s, devices))  # the same layout on both twins
        self.params = [p for s in by_model for p in stages[s].parameters() if p.requires_grad]
        self.before: list[torch.Tensor | None] = []

    def start(self) -> None:
        """Call before the step: what is already in ``.grad`` stays out of the exchange."""
        self.before = [None if p.grad is None else p.grad.detach().clone() for p in self.params]

    def finish(self) -> None:
        """Call after the step's last op: exchange this step's gradients with the twin rank and add."""
        if not self.params:
            return
        mine = torch.cat([self._step_grad(k).reshape(-1) for k in range(len(self.params))])
        theirs = torch.empty_like(mine)
        try:
            works = [dist.isend(mine, group=self.group, group_dst=self.peer, tag=TWIN_TAG),
                     dist.irecv(theirs, group=self.group, group_src=self.peer, tag=TWIN_TAG)]
            for w in works:
                if w.wait(self.timeout) is False:
                    raise PipelineTimeoutError(f"rank {self.rank}: the twin gradient sum with rank {self.peer} "
                                               f"timed out after {self.timeout.total_seconds():g} s")
        except RuntimeError as e:
            raise PipelineError(f"rank {self.rank}: the twin gradient sum with rank {self.peer} failed "
                                f"(peer died?): {str(e).splitlines()[0]}") from e
        total = mine + theirs
        offset = 0
        for p, before in zip(self.params, self.before, strict=True):
            n = p.numel()
            step = total[offset:offset + n].view_as(p)
            p.grad = step.clone() if before is None else before + step
            offset += n

    def _step_grad(self, k: int) -> torch.Tensor:
        p, before = self.params[k], self.before[k]
        if p.grad is None:
            return torch.zeros_like(p)
        return p.grad.detach() if before is None else p.grad.detach() - before

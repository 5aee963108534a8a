"""The twin weight-gradient sum of a dual placement (DualPipe): ranks r and p−1−r hold the same layers.

Under ``placement: "dual"`` (docs/dualpipe.md) the model has p stages and lives twice: rank r runs
stage id r of the downward copy (model stage r) and stage id 2p−1−r of the upward copy (model stage
p−1−r), so rank r and its peer p−1−r hold the same two model stages, each having seen half of the
microbatches. Like the data-parallel all-reduce, the sum sits outside the schedule, after the
step's last op: each rank sends the peer its gradients of the step (both model stages, flattened in
model-stage order, one message each way per dtype, posted in the order :func:`plan.twin_exchange`
gives, which NCCL needs) and adds what it receives. Addition is commutative, so
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

from ..errors import PipelineError, PipelineTimeoutError
from .plan import TwinSend, twin_exchange

#: Tag of the twin exchange, above every message tag of a step (see :func:`comm.message_tag`).
TWIN_TAG = 2**30


def model_stage(stage: int, devices: int) -> int:
    """The model stage a dual stage id runs: ``s`` for the downward copy, ``s − p`` for the upward one."""
    return stage - devices if stage >= devices else stage


class TwinSum:
    """Per rank of a dual placement: remember the gradients before a step, sum the step's with the twin's.

    The exchange buffers (one flat buffer per dtype, each way) are allocated once and reused, and the
    sum is written into the existing ``.grad`` tensors: a step allocates nothing. Fresh multi-MiB
    buffers every step cost page faults on each first touch (on the 2-core fidelity machine about as
    much CPU as copying them), and freeing them made the allocator return memory the next step's
    ops then faulted in again.
    """

    def __init__(self, stages: Mapping[int, nn.Module], devices: int, rank: int, group: dist.ProcessGroup | None,
                 timeout_s: float) -> None:
        self.peer = devices - 1 - rank
        self.rank = rank
        self.devices = devices
        self.group = group
        self.timeout = timedelta(seconds=timeout_s)
        by_model = sorted(stages, key=lambda s: model_stage(s, devices))  # the same layout on both twins
        self.params = [p for s in by_model for p in stages[s].parameters() if p.requires_grad]
        self.before: list[torch.Tensor | None] = []
        dtypes = sorted({p.dtype for p in self.params}, key=str)
        self.buckets = [_Bucket([k for k, p in enumerate(self.params) if p.dtype == d], self.params) for d in dtypes]

    def start(self) -> None:
        """Call before the step: what is already in ``.grad`` stays out of the exchange."""
        self.before = [None if p.grad is None else p.grad.detach().clone() for p in self.params]

    def finish(self) -> None:
        """Call after the step's last op: exchange this step's gradients with the twin rank and add."""
        if not self.params:
            return
        for b in self.buckets:
            for k, view in zip(b.members, b.mine.split(b.sizes), strict=True):
                self._step_grad_into(k, view)
        try:
            works = []
            for call in twin_exchange(self.rank, self.devices, len(self.buckets)):
                b, tag = self.buckets[call.bucket], TWIN_TAG + call.bucket
                works.append(dist.isend(b.mine, group=self.group, group_dst=call.peer, tag=tag)
                             if isinstance(call, TwinSend) else
                             dist.irecv(b.theirs, group=self.group, group_src=call.peer, tag=tag))
            for w in works:
                if w.wait(self.timeout) is False:
                    raise PipelineTimeoutError(f"rank {self.rank}: the twin gradient sum with rank {self.peer} "
                                               f"timed out after {self.timeout.total_seconds():g} s")
        except RuntimeError as e:
            raise PipelineError(f"rank {self.rank}: the twin gradient sum with rank {self.peer} failed "
                                f"(peer died?): {str(e).splitlines()[0]}") from e
        for b in self.buckets:
            b.mine.add_(b.theirs)  # mine + theirs: addition commutes, so both twins get the same bits
            for k, total in zip(b.members, b.mine.split(b.sizes), strict=True):
                p, before = self.params[k], self.before[k]
                total = total.view_as(p)
                if p.grad is None:
                    p.grad = total.clone() if before is None else before + total
                elif before is None:
                    p.grad.copy_(total)
                else:
                    torch.add(before, total, out=p.grad)

    def _step_grad_into(self, k: int, out: torch.Tensor) -> None:
        """This step's gradient of parameter ``k`` (``.grad`` minus what it held before), flattened into ``out``."""
        p, before = self.params[k], self.before[k]
        if p.grad is None:
            out.zero_()
        elif before is None:
            out.copy_(p.grad.detach().reshape(-1))
        else:
            torch.sub(p.grad.detach().reshape(-1), before.reshape(-1), out=out)


class _Bucket:
    """The parameters of one dtype (``members``: indices into the params) and their exchange buffers."""

    def __init__(self, members: list[int], params: list[torch.Tensor]) -> None:
        self.members = members
        self.sizes = [params[k].numel() for k in members]
        like = params[members[0]]
        self.mine = torch.empty(sum(self.sizes), dtype=like.dtype, device=like.device)
        self.theirs = torch.empty_like(self.mine)

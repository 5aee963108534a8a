"""Point-to-point transport for the executor: tagged isend/irecv, shape agreement, bounded waits.

Activations crossing ranks have shapes only the sender knows on the first step, so the first
step sends a small header (dtype code, rank, dims) before each activation; the receiver caches
it per (stage, microbatch) and later steps send the bare tensor. Gradients need no header: they
have the shape of the activation the receiver itself produced. Every wait has a timeout, and a
failure becomes a :class:`PipelineError` naming the rank, the op that needed the tensor and the peer.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from ..errors import PipelineError, PipelineTimeoutError
from .plan import Message

_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.bool]
_HEADER_LEN = 2 + 8  # dtype code, ndim, up to 8 dims


def message_tag(message: Message, num_stages: int, header: bool = False) -> int:
    """A tag unique per message within a step (gloo matches on it; NCCL matches by order)."""
    kind = 0 if message.direction == "act" else 1
    return ((message.op.microbatch * num_stages + message.op.stage) * 2 + kind) * 2 + int(header)


def encode_header(t: torch.Tensor) -> torch.Tensor:
    if t.dim() > 8 or t.dtype not in _DTYPES:
        raise PipelineError(f"cannot send a tensor of dtype {t.dtype} with {t.dim()} dims between stages "
                            f"(supported: <= 8 dims, dtypes {', '.join(str(d) for d in _DTYPES)})")
    h = torch.zeros(_HEADER_LEN, dtype=torch.int64)
    h[0], h[1] = _DTYPES.index(t.dtype), t.dim()
    h[2:2 + t.dim()] = torch.tensor(t.shape, dtype=torch.int64)
    return h


def decode_header(h: torch.Tensor) -> tuple[torch.Size, torch.dtype]:
    values = h.tolist()
    return torch.Size(values[2:2 + values[1]]), _DTYPES[values[0]]


@dataclass
class Pending:
    """A posted receive (or send): its work handle and the buffer it fills (or reads)."""

    message: Message
    work: dist.Work | None
    buffer: torch.Tensor


class Transport:
    """isend/irecv between pipeline ranks of ``group``, with every wait bounded by ``timeout_s``."""

    def __init__(self, rank: int, group: dist.ProcessGroup | None, num_stages: int, timeout_s: float,
                 device: torch.device) -> None:
        self.rank = rank
        self.group = group
        self.num_stages = num_stages
        self.timeout = timedelta(seconds=timeout_s)
        self.device = device

    def isend(self, message: Message, t: torch.Tensor, header: bool) -> list[Pending]:
        out = []
        if header:
            h = encode_header(t).to(self.device)  # NCCL sends device tensors only
            out.append(Pending(message, dist.isend(h, group=self.group, group_dst=message.dst,
                                                   tag=message_tag(message, self.num_stages, True)), h))
        t = t.contiguous()
        out.append(Pending(message, dist.isend(t, group=self.group, group_dst=message.dst,
                                               tag=message_tag(message, self.num_stages)), t))
        return out

    def irecv(self, message: Message, shape: torch.Size, dtype: torch.dtype) -> Pending:
        buf = torch.empty(shape, dtype=dtype, device=self.device)
        work = dist.irecv(buf, group=self.group, group_src=message.src, tag=message_tag(message, self.num_stages))
        return Pending(message, work, buf)

    def recv_header(self, message: Message, waiting_op: str) -> tuple[torch.Size, torch.dtype]:
        h = torch.empty(_HEADER_LEN, dtype=torch.int64, device=self.device)
        work = dist.irecv(h, group=self.group, group_src=message.src, tag=message_tag(message, self.num_stages, True))
        self.wait(Pending(message, work, h), waiting_op, what="the shape header of")
        return decode_header(h)

    def wait(self, p: Pending, waiting_op: str, what: str = "") -> torch.Tensor:
        """Block until ``p`` completes; raise a :class:`PipelineError` naming rank, op and peer otherwise."""
        if p.work is None:
            return p.buffer
        m = p.message
        outgoing = m.src == self.rank
        peer = m.dst if outgoing else m.src
        verb = "sending" if outgoing else "receiving"
        noun = "activation" if m.direction == "act" else "input gradient"
        where = (f"rank {self.rank} ({waiting_op}): {verb} {what + ' ' if what else ''}the {noun} of {m.op} "
                 f"{'to' if outgoing else 'from'} rank {peer}")
        try:
            ok = p.work.wait(self.timeout)
        except RuntimeError as e:
            text = str(e)
            if "timeout" in text.lower() or "timed out" in text.lower():
                raise PipelineTimeoutError(f"{where} timed out after {self.timeout.total_seconds():g} s "
                                           f"(peer dead or stuck?): {text.splitlines()[0]}") from e
            raise PipelineError(f"{where} failed (peer died?): {text.splitlines()[0]}") from e
        if ok is False:
            raise PipelineTimeoutError(f"{where} timed out after {self.timeout.total_seconds():g} s")
        p.work = None
        return p.buffer

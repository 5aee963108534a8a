"""The work after a step's last op that a schedule's makespan does not hold: the twin gradient sum.

Under a dual placement (DualPipe) ranks r and p−1−r hold the same two model stages, and after the
step's last op each pair exchanges and adds its gradients (:mod:`runtime.twins`). The schedule
ends at its last op, but a replayed step ends when the sum is done, so a prediction that leaves it
out is short by the whole exchange: with two ranks every parameter of the model crosses the link
each way and is copied and added twice on each side.

:func:`profile_twin_sum` measures that routine itself (the runtime's :class:`TwinSum`, on synthetic
parameters of a few sizes, every pair exchanging at once as in a step), fitted as
``latency + bytes / rate``; :func:`dual_step_ms` adds it to each pair's later end. Nothing here is
fitted on a replayed schedule, so a dual row's prediction stays a prediction.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch import nn

from pipesched.solver import Schedule

from ..replay.twins import TwinSum
from .profile_layers import GIB, LinkProfile, _fit


class _Flat(nn.Module):
    """One parameter of ``n`` float32 elements: a stand-in for a model stage's weights."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(n))


def profile_twin_sum(group: dist.ProcessGroup | None = None,
                     sizes: Sequence[int] = (2**20, 2**23, 2**25), repeats: int = 5, warmup: int = 2,
                     timeout_s: float = 60.0) -> LinkProfile:
    """Wall time (ms) of the twin gradient sum for ``sizes`` bytes of gradients per rank (max over
    ranks, median of ``repeats``), fitted as ``latency + bytes / rate``. Every rank of ``group`` calls
    this (an even number of ranks: the pairs of a dual placement exchange at the same time) and gets
    the same fit. ``samples`` holds (bytes, ms) per size."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    if world % 2:
        raise ValueError(f"a dual placement pairs ranks: the group needs an even number of ranks (got {world})")
    samples: list[tuple[int, float]] = []
    for size in sizes:
        half = max(1, size // 8)  # two model stages of float32 per rank
        stages = {rank: _Flat(half), 2 * world - 1 - rank: _Flat(half)}
        twins = TwinSum(stages, world, rank, group, timeout_s)
        times = []
        for k in range(warmup + repeats):
            for m in stages.values():
                m.w.grad = None
            twins.start()
            for m in stages.values():  # the step's gradients, freshly written as W would
                m.w.grad = torch.full_like(m.w, float(rank + 1))
            dist.barrier(group)
            t0 = time.perf_counter()
            twins.finish()
            if k >= warmup:
                times.append(1e3 * (time.perf_counter() - t0))
        slowest = torch.tensor([statistics.median(times)], dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=group)
        samples.append((8 * half, float(slowest.item())))
    return _fit(samples)


def param_bytes(modules: Sequence[nn.Module]) -> int:
    """Bytes of the trainable parameters of ``modules`` (what the twin sum exchanges)."""
    return sum(p.numel() * p.element_size() for m in modules for p in m.parameters() if p.requires_grad)


def twin_ms(twin: LinkProfile, nbytes: float) -> float:
    """Predicted twin-sum time (ms) for ``nbytes`` of gradients per rank."""
    return twin.latency_ms + (nbytes / GIB / twin.gib_per_ms if twin.gib_per_ms else 0.0)


def dual_step_ms(schedule: Schedule, stage_bytes: Sequence[float], twin: LinkProfile) -> float:
    """The step a dual-placement schedule takes with the twin sum after it: per pair (r, p−1−r),
    the later of the two ranks' last op ends, plus the sum of ``stage_bytes[r] + stage_bytes[p−1−r]``
    (model stages r and p−1−r, held by both)."""
    p = schedule.problem.devices
    ends = [0.0] * p
    for op in schedule.ops:
        ends[op.device] = max(ends[op.device], op.end)
    return max(max(ends[r], ends[p - 1 - r]) + twin_ms(twin, stage_bytes[r] + stage_bytes[p - 1 - r])
               for r in range(p))


def twin_after(makespan: float, stage_bytes: Sequence[float], twin: LinkProfile) -> float:
    """``makespan`` plus the slowest pair's twin sum: for a re-timing known only by its makespan
    (every pair taken to end at it, an upper estimate)."""
    p = len(stage_bytes)
    return makespan + max(twin_ms(twin, stage_bytes[r] + stage_bytes[p - 1 - r]) for r in range(p))

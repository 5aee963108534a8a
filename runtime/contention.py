"""How much slower compute runs when every pipeline rank computes at once: the contention factor.

A stage profiled in one process measures its compute alone. Replayed, ``p`` ranks compute at the
same time; when they outnumber the cores (4 gloo ranks on 2 cores) or share them with other work,
each op takes longer than profiled, and no other term of the cost model (comm, per-op overhead)
accounts for it. :func:`contention_factor` measures it directly, by a calibration run independent
of any schedule: the same fixed matmul kernel timed on each rank alone (the others waiting at a
barrier) and then on every rank at once. The factor is the mean over ranks of together / alone
(1 on an idle machine with a core per rank; about ``p / cores`` beyond that).

Multiplying every op's compute by it is an upper estimate for ops that run in a bubble of the
other ranks (fewer ranks compete there); pipelines spend most of a step with every rank busy.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist


def _kernel_ms(a: torch.Tensor, repeats: int, warmup: int, block: int = 64) -> float:
    """Median wall time of ``repeats`` blocks of ``block`` matmuls. A block lasts tens of ms, longer
    than the scheduler's time slice, so ranks sharing a core show up in every block (a single short
    kernel would often run in a slice of its own and hide the sharing)."""
    times = []
    for k in range(warmup + repeats):
        t0 = time.perf_counter()
        for _ in range(block):
            a @ a
        if k >= warmup:
            times.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(times)


def contention_factor(group: dist.ProcessGroup | None = None, size: int = 192, repeats: int = 7,
                      warmup: int = 1, rounds: int = 3) -> float:
    """Mean over the ranks of ``group`` of the median over ``rounds`` of (kernel time with every rank
    running it) / (kernel time alone), floored at 1. Every rank of ``group`` calls this and gets the
    same number.

    Why rounds: a one-shot reading taken while other work on the machine comes and goes can catch a
    burst in one of its two halves (once ×2.08 for 2 ranks on 2 cores, which scaled every prediction
    of that world size); alone and together alternate here, and the median ratio keeps a burst that
    hit one round out of the factor."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    a = torch.randn(size, size, generator=torch.Generator().manual_seed(0))
    ratios = []
    for _ in range(max(1, rounds)):
        alone = 0.0
        for r in range(world):  # each rank alone in turn
            dist.barrier(group)
            if rank == r:
                alone = _kernel_ms(a, repeats, warmup)
        dist.barrier(group)
        ratios.append(_kernel_ms(a, repeats, warmup) / alone)
    ratio = torch.tensor([statistics.median(ratios)], dtype=torch.float64)
    dist.all_reduce(ratio, group=group)
    return max(1.0, float(ratio.item()) / world)

"""How much slower compute runs when every pipeline rank computes at once: the contention factor.

A stage profiled in one process measures its compute alone. Replayed, ``p`` ranks compute at the
same time; when they outnumber the cores (4 gloo ranks on 2 cores) or share them with other work,
each op takes longer than profiled, and no other term of the cost model (comm, per-op overhead)
accounts for it. :func:`contention_factor` measures it directly, by a calibration run independent
of any schedule: the same fixed matmul kernel timed on each rank alone (the others waiting at a
barrier) and then on every rank at once. The factor is the mean over ranks of together / alone
(1 on an idle machine with a core per rank; about ``p / cores`` beyond that).

Multiplying every op's compute by it is an upper estimate for ops that run in a bubble of the
other ranks (fewer ranks compete there). :func:`slowdown_curve` measures the same ratio for every
count of busy ranks, with a real stage op, for re-timing a schedule op by op. Both share one
alternated alone/together calibration (:func:`_slowdowns`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
import torch.distributed as dist


def _op_ms(op: Callable[[], object], repeats: int, warmup: int, block_ms: float) -> float:
    """Median wall time of ``op`` over ``repeats`` blocks. A block repeats ``op`` for about ``block_ms``,
    longer than the scheduler's time slice, so ranks sharing a core show up in every block (a single
    short op would often run in a slice of its own and hide the sharing); the count is fixed by the
    warm-up's timing."""
    t0 = time.perf_counter()
    for _ in range(max(1, warmup)):
        op()
    each = 1e3 * (time.perf_counter() - t0) / max(1, warmup)
    count = max(1, round(block_ms / max(each, 1e-6)))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(count):
            op()
        times.append(1e3 * (time.perf_counter() - t0) / count)
    return statistics.median(times)


def _slowdowns(op: Callable[[], object], group: dist.ProcessGroup | None, levels: list[int], repeats: int,
               warmup: int, rounds: int, block_ms: float) -> list[float]:
    """For each ``k`` of ``levels`` (2 .. world): the mean over ranks ``0 .. k − 1`` of the median over
    ``rounds`` of (``op``'s time with those ``k`` ranks running it at once) / (its time alone, each rank
    in turn with the others waiting at a barrier). Every rank gets the same list.

    Why rounds: a one-shot reading taken while other work on the machine comes and goes can catch a
    burst in one of its two halves (once ×2.08 for 2 ranks on 2 cores, which scaled every prediction
    of that world size); alone and together alternate here, and the median ratio keeps a burst that
    hit one round out."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    ratios: list[list[float]] = [[] for _ in levels]
    for _ in range(max(1, rounds)):
        alone = 0.0
        for r in range(world):  # each rank alone in turn
            dist.barrier(group)
            if rank == r:
                alone = _op_ms(op, repeats, warmup, block_ms)
        for i, k in enumerate(levels):  # ranks 0 .. k - 1 at once
            dist.barrier(group)
            together = _op_ms(op, repeats, warmup, block_ms) if rank < k else alone
            ratios[i].append(together / alone)
    mine = torch.tensor([statistics.median(x) for x in ratios], dtype=torch.float64)
    dist.all_reduce(mine, group=group)
    # a rank outside level k added 1: the mean over the k ranks that ran
    return [max(1.0, (float(mine[i]) - (world - k)) / k) for i, k in enumerate(levels)]


def contention_factor(group: dist.ProcessGroup | None = None, size: int = 192, repeats: int = 7,
                      warmup: int = 1, rounds: int = 3, block_ms: float = 20.0) -> float:
    """How much slower a fixed ``size``-wide matmul runs with every rank of ``group`` running it at once
    than alone (mean over ranks, median over ``rounds``), floored at 1; every rank gets the same number."""
    world = dist.get_world_size(group)
    if world < 2:
        return 1.0
    a = torch.randn(size, size, generator=torch.Generator().manual_seed(0))
    return _slowdowns(lambda: a @ a, group, [world], repeats, warmup, rounds, block_ms)[0]


def slowdown_curve(op: Callable[[], object], group: dist.ProcessGroup | None = None, repeats: int = 5,
                   warmup: int = 2, rounds: int = 3, block_ms: float = 60.0, cores: int | None = None) -> list[float]:
    """``curve[k - 1]``: how much longer ``op`` (a real stage op, e.g. a block's forward and backward)
    takes on each of ``k`` ranks running it at once than on one rank alone, for ``k = 1 .. world``;
    every rank of ``group`` calls this and gets the same list.

    Why a curve and not one factor: a pipeline rarely has every rank busy. In its ramps and bubbles
    fewer compete, and the slowdown with ``k`` busy ranks is neither 1 nor the all-busy factor; nor is
    it ``k / cores`` on a virtual machine whose vCPUs slow each other. Re-timing a schedule with the
    measured slowdown for each count of busy ranks (:func:`pipesched.solver.costmodel.shared_cores.curve_makespan`)
    covers both.

    Each entry is at least ``k / cores`` (``cores``: the CPUs this process may use): ``k`` one-thread
    ranks cannot together run faster than the cores do. A reading below that (1.39 for 3 ranks on 2
    vCPUs, once) comes from ranks whose timed blocks did not fully overlap, which the re-timing,
    where the k ops do run together, must not inherit."""
    from pipesched.solver.costmodel.shared_cores import usable_cores

    world = dist.get_world_size(group)
    cores = usable_cores() if cores is None else cores
    raw = [1.0] + _slowdowns(op, group, list(range(2, world + 1)), repeats, warmup, rounds, block_ms)
    return [max(x, k / cores) for k, x in enumerate(raw, 1)]


def handoff_curve(op: Callable[[], object], group: dist.ProcessGroup | None = None, window_s: float = 0.3,
                  rounds: int = 3) -> list[float]:
    """``curve[j]`` (ms): how much longer a one-way hand-off between two ranks takes (a small tensor sent,
    the receiver blocked in ``recv`` until it arrives) while ``j`` other ranks run ``op`` back to back,
    than while they wait; ``j = 0 .. world − 2``, ``curve[0] = 0``. Every rank gets the same list.

    Why: in a replay a rank waiting for its input sleeps, and when the input comes it must get a core
    back. With more ranks than cores the others hold them, so every hand-off costs more than the link
    alone: the term the slowdown curve (ops running) cannot see. Ranks 0 and 1 ping-pong for
    ``window_s`` while ranks 2 .. j + 1 compute; the median round trip over ``rounds`` windows, halved."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    if world < 2:
        return [0.0]
    token = torch.zeros(16)
    medians: list[list[float]] = [[] for _ in range(world - 1)]
    for _ in range(max(1, rounds)):
        for j in range(world - 1):
            dist.barrier(group)
            end = time.perf_counter() + window_s
            if rank in (0, 1):
                trips = []
                while True:  # both pingers see the same count: rank 0 says when to stop in the token
                    t0 = time.perf_counter()
                    if rank == 0:
                        token[0] = 1.0 if time.perf_counter() < end else 0.0
                        dist.send(token, 1, group=group)
                        dist.recv(token, 1, group=group)
                    else:
                        dist.recv(token, 0, group=group)
                        dist.send(token, 0, group=group)
                    trips.append(time.perf_counter() - t0)
                    if token[0] == 0.0:
                        break
                medians[j].append(1e3 * statistics.median(trips) / 2)
            elif rank < 2 + j:
                while time.perf_counter() < end + 0.02:  # a little past the pingers' last trip
                    op()
    mine = torch.tensor([statistics.median(x) if x else 0.0 for x in medians], dtype=torch.float64)
    dist.broadcast(mine, group=group, group_src=0)
    base = float(mine[0])
    return [max(0.0, float(x) - base) for x in mine]

"""Run a function on N local processes joined in a gloo group (checks, tests, benchmarks).

Every process is bounded: the parent waits at most ``timeout_s`` in total, then kills whatever
is still running and reports it, so a broken schedule or a dead peer can never hang the caller.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import socket
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RankResult:
    rank: int
    ok: bool
    value: Any = None  # fn's return value when ok, else the error text


class LaunchError(RuntimeError):
    """Some rank failed or overran; the message lists each rank's error."""


def _entry(fn: Callable[..., Any], rank: int, world: int, port: int, backend: str, pg_timeout_s: float,
           threads: int, args: tuple, out: Any) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    try:
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=timedelta(seconds=pg_timeout_s))
        try:
            out.put(RankResult(rank, True, fn(rank, world, *args)))
        finally:
            dist.destroy_process_group()
    except BaseException as e:  # report every failure to the parent, whatever it is
        out.put(RankResult(rank, False, f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=4)}"))


def run_ranks(fn: Callable[..., Any], world: int, *args: Any, timeout_s: float = 60.0,
              backend: str = "gloo", threads: int = 1, check: bool = True) -> list[RankResult]:
    """``fn(rank, world, *args)`` on ``world`` spawned processes; results in rank order.

    ``fn`` must be importable (a module-level function). Raises :class:`LaunchError` when a rank
    fails (with ``check``) or when any process is still running after ``timeout_s`` (always).
    """
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_entry, args=(fn, r, world, port, backend, max(5.0, timeout_s * 0.8), threads,
                                              args, out), daemon=True) for r in range(world)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout_s
    results: dict[int, RankResult] = {}
    try:
        while len(results) < world:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                r = out.get(timeout=min(left, 0.5))
            except queue.Empty:
                if all(not p.is_alive() for p in procs) and out.empty():
                    break
                continue
            results[r.rank] = r
        for p in procs:
            p.join(timeout=max(0.1, min(5.0, deadline - time.monotonic())))
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
    missing = [r for r in range(world) if r not in results]
    failed = [results[r] for r in sorted(results) if not results[r].ok]
    if missing:
        raise LaunchError(f"rank(s) {missing} did not finish within {timeout_s:g} s and were killed"
                          + "".join(f"\nrank {f.rank}: {f.value}" for f in failed))
    if check and failed:
        raise LaunchError("\n".join(f"rank {f.rank}: {f.value}" for f in failed))
    return [results[r] for r in range(world)]

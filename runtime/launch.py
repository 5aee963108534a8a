"""Run a function on N local processes joined in a gloo group (checks, tests, benchmarks).

Every process is bounded: the parent waits at most ``timeout_s`` in total, then kills whatever
is still running and reports it, so a broken schedule or a dead peer can never hang the caller.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import pickle
import queue
import socket
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from .host_memory import keep_freed_host_memory

#: Seconds a rank that already reported may spend tearing down before it is killed.
TEARDOWN_GRACE_S = 1.0


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
    keep_freed_host_memory()  # before any tensor: ops cost what profiles measured
    try:
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=timedelta(seconds=pg_timeout_s))
        # plain pickle: torch's queue reducers would share tensors through fds that die with us
        result = RankResult(rank, True, pickle.dumps(fn(rank, world, *args)))
    except BaseException as e:  # report every failure to the parent, whatever it is
        result = RankResult(rank, False, f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=4)}")
    out.put(result)  # before tearing down: after a failure, teardown can wait on a dead peer
    if dist.is_initialized():
        # Every rank meets here before any tears its group down: a rank whose function returned at
        # once could otherwise close its sockets while a peer is still connecting the full mesh (a
        # "Connection closed by peer" in that peer). A dead or stuck peer makes this fail or wait;
        # the parent has every result by now and kills what is left after a short grace.
        with contextlib.suppress(Exception):
            dist.barrier()
        dist.destroy_process_group()


def _context() -> mp.context.BaseContext:
    """A forkserver that imports torch once: each rank then starts in a fraction of a second
    instead of re-importing torch (seconds per process on a loaded machine)."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch.distributed", "pipesched.runtime.replay.executor"])
    return ctx


def run_ranks(fn: Callable[..., Any], world: int, *args: Any, timeout_s: float = 60.0,
              backend: str = "gloo", threads: int = 1, check: bool = True) -> list[RankResult]:
    """``fn(rank, world, *args)`` on ``world`` spawned processes; results in rank order.

    ``fn`` must be importable (a module-level function). Raises :class:`LaunchError` when a rank
    fails (with ``check``) or when any process is still running after ``timeout_s`` (always).
    """
    ctx = _context()
    out = ctx.Queue()
    port = free_port()
    # not daemonic: a rank may start processes of its own, as a trainer's rank does (a local plan is made in
    # a forked child); the ``finally`` below kills every rank still running, whatever happened
    procs = [ctx.Process(target=_entry, args=(fn, r, world, port, backend, max(5.0, timeout_s * 0.8), threads,
                                              args, out)) for r in range(world)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout_s
    results: dict[int, RankResult] = {}
    overran: list[int] = []
    try:
        while len(results) < world:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                r = out.get(timeout=min(left, 0.5))
            except queue.Empty:
                if all(r in results or not procs[r].is_alive() for r in range(world)) and out.empty():
                    break  # every rank reported or died
                continue
            if r.ok:
                r.value = pickle.loads(r.value)
            results[r.rank] = r
        grace = time.monotonic() + TEARDOWN_GRACE_S  # every rank reported: let them tear down briefly
        for p in procs:
            p.join(timeout=max(0.0, min(grace, deadline) - time.monotonic()))
    finally:
        for r, p in enumerate(procs):
            if p.is_alive():
                if r not in results:
                    overran.append(r)
                p.kill()
                p.join(timeout=5)
    for r, p in enumerate(procs):
        if r not in results:
            why = "killed after the timeout" if r in overran else f"exited with code {p.exitcode} without reporting"
            results[r] = RankResult(r, False, why)
    ordered = [results[r] for r in range(world)]
    report = "\n".join(f"rank {x.rank}: {x.value}" for x in ordered if not x.ok)
    if overran:
        raise LaunchError(f"rank(s) {overran} still running after {timeout_s:g} s and were killed\n{report}")
    if check and report:
        raise LaunchError(report)
    return ordered

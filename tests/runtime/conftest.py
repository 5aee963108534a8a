"""Runtime tests: gloo on 127.0.0.1 (free ports), one thread per process, every spawn time-bounded.

Spawning processes that import torch costs seconds each, so each spawned group replays many
schedules; ``run_ranks`` kills any process still running at its timeout. On top of that every
test here (setup included) is bounded by an alarm, so nothing in this folder can hang the suite.

``run_ranks`` forks its ranks from a forkserver that has imported torch, but a process has one
forkserver and it keeps the preload of whoever started it first: in the full suite the API tests
start it first, with the solver preload, and every rank then imported torch again (seconds per
rank, per spawned group). So entering this folder detaches from a running forkserver (the next
``run_ranks`` starts its own, torch preloaded), and leaving it detaches again and restores the
preload list, so later tests start theirs as they would have.

Without torch these tests skip, except with ``PIPESCHED_REQUIRE_TORCH=1`` (as ``.ci/run`` sets):
there a missing or broken torch fails the run, so CI cannot pass by skipping the runtime.
"""

from __future__ import annotations

import contextlib
import multiprocessing.forkserver
import multiprocessing.util
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

if os.environ.get("PIPESCHED_REQUIRE_TORCH") == "1":
    try:
        import torch
    except ImportError as e:
        raise pytest.UsageError(f"PIPESCHED_REQUIRE_TORCH=1 but torch cannot be imported: {e}") from e
else:
    torch = pytest.importorskip("torch")
torch.set_num_threads(1)

#: Upper bound for one test including its fixtures' setup and teardown.
TEST_TIMEOUT_S = int(os.environ.get("PIPESCHED_RUNTIME_TEST_TIMEOUT", "150"))

_HERE = Path(__file__).parent


def _on_alarm(signum: int, frame: object) -> None:
    raise TimeoutError(f"runtime test still running after {TEST_TIMEOUT_S} s")


def _detach_forkserver() -> None:
    """Forget the running forkserver, so the next fork starts a fresh one with the preload set then.

    Closing our end of its "alive" pipe makes it exit once the processes it forked (which hold
    that pipe too) have; unlike ``ForkServer._stop`` this never waits for them, so a straggler
    from another test cannot block this one. Reaped for up to a second, else left to exit alone.
    """
    server = multiprocessing.forkserver._forkserver
    with server._lock:
        pid, alive, address = server._forkserver_pid, server._forkserver_alive_fd, server._forkserver_address
        if pid is None:
            return
        server._forkserver_pid = server._forkserver_alive_fd = server._forkserver_address = None
    os.close(alive)
    if address and not multiprocessing.util.is_abstract_socket_namespace(address):
        with contextlib.suppress(OSError):
            os.unlink(address)
    for _ in range(20):
        if os.waitpid(pid, os.WNOHANG)[0]:
            return
        time.sleep(0.05)


def _inside(item: pytest.Item | None) -> bool:
    return item is not None and _HERE in Path(str(item.path)).parents


#: The forkserver preload list in force before the first test of this folder (None: not inside).
_preload_before: list[str] | None = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    global _preload_before
    if not _inside(item):
        yield
        return
    if _preload_before is None:  # entering the folder: ranks fork from a torch-preloaded server
        _preload_before = list(multiprocessing.forkserver._forkserver._preload_modules)
        _detach_forkserver()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(TEST_TIMEOUT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        if not _inside(nextitem):  # leaving: later forks start a server with their own preload
            _detach_forkserver()
            multiprocessing.forkserver.set_forkserver_preload(_preload_before)
            _preload_before = None

"""A solve at a lower OS priority (``pipesched worker --nice N|idle``): the body of the solve process.

On a host that also runs an API replica (or anything a person waits on), solves are the work that
can wait. ``--nice idle`` (the default) puts the solve in an idle CPU cgroup where the cgroup file system
allows it (:mod:`.idle_cgroup`), else in Linux's ``SCHED_IDLE`` class with its session's group at
nice 19: it runs on cores nothing else wants, and a woken replica preempts it (the best latency
for the replica, measured: benchmarks/results/scale_out.md), at the price of little progress on a
host busy with other work; a worker on a host of its own loses nothing.
``--nice 10`` gives a solve about a tenth of a core's share against a normal-priority process that
wants the core (Linux weights 110 vs 1024) while it still uses every idle cycle. Only the solve
process is lowered; the worker's own loop (claims, heartbeats) keeps normal priority, so a busy
host does not starve the heartbeats and have its jobs taken over. ``--nice 0`` turns it off.

A lowered solve also asks for the longest time slice (:func:`long_slice`): on Linux 6.12+ a woken
task with a shorter slice preempts the running one at once instead of waiting for the end of its
slice, so a replica's cache hit does not queue behind a solve's slice on a shared core.
"""

from __future__ import annotations

import ctypes
import os
import platform
from multiprocessing.connection import Connection

from ..solving import worker
from .idle_cgroup import join_idle_cgroup

#: ``--nice`` value for the ``SCHED_IDLE`` scheduling class.
IDLE = "idle"
#: The time slice a lowered solve asks for: the longest Linux accepts (it clamps to 0.1-100 ms).
SOLVE_SLICE_NS = 100_000_000
#: ``sched_setattr`` system call numbers (no wrapper in :mod:`os`).
_SCHED_SETATTR = {"x86_64": 314, "aarch64": 274}


class _SchedAttr(ctypes.Structure):
    """``struct sched_attr``, version 0 (48 bytes), as ``sched_setattr(2)`` reads it."""

    _fields_ = [("size", ctypes.c_uint32), ("policy", ctypes.c_uint32), ("flags", ctypes.c_uint64),
                ("nice", ctypes.c_int32), ("priority", ctypes.c_uint32), ("runtime", ctypes.c_uint64),
                ("deadline", ctypes.c_uint64), ("period", ctypes.c_uint64)]


def parse_nice(text: str) -> int | str:
    """``0``..``19`` or ``idle``; ValueError naming what is accepted otherwise."""
    if text.strip().lower() == IDLE:
        return IDLE
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 19:
        raise ValueError(f"must be from 0 (as the worker) to 19 (lowest), or 'idle' (got {text!r})")
    return value


def lower_priority(nice: int | str) -> str:
    """Lower this process's priority as ``--nice`` asks; returns how (for logs and tests).

    ``idle``: an idle cgroup when the cgroup file system allows it (:mod:`.idle_cgroup`: a woken
    replica preempts the solve at once, whatever its group), else ``SCHED_IDLE`` in an autogroup of
    its own at nice 19 (a woken replica in another group may wait for the next tick); elsewhere
    than Linux, nice 19."""
    if nice in (0, "0"):
        return "not lowered"
    if nice == IDLE and hasattr(os, "SCHED_IDLE"):
        group = join_idle_cgroup()
        how = f"idle cgroup {group}" if group is not None else "SCHED_IDLE in an autogroup at nice 19"
        if group is None:
            _own_autogroup(19)
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        long_slice(os.SCHED_IDLE)
        return how
    value = 19 if nice == IDLE else int(nice)
    _own_autogroup(value)
    os.nice(value)
    long_slice(getattr(os, "SCHED_OTHER", 0))
    return f"nice {value}"


def run_solve_niced(conn: Connection, nice: int | str, problem_json: str, method: str, time_limit_s: float,
                    hint_json: str | None, workers: int) -> None:
    lower_priority(nice)
    worker.run_solve(conn, problem_json, method, time_limit_s, hint_json, workers)


def long_slice(policy: int) -> bool:
    """Ask for a long time slice (Linux 6.12+, EEVDF), keeping ``policy`` and the nice value.

    Why: when a request handler wakes on a core a solve is using, the kernel lets the solve finish
    its current slice first ("run to parity", the default ~1.4 ms here, and a cache hit wakes two
    processes: the replica and its client) unless the woken task's slice is shorter than the
    running one's. A solve with the longest slice is thus preempted at once by a woken replica
    with the default slice, whatever the autogroups, and loses nothing (it wants long runs anyway).
    Older kernels take the call and ignore the slice. Returns whether the kernel accepted it."""
    number = _SCHED_SETATTR.get(platform.machine())
    if number is None:
        return False
    attr = _SchedAttr(size=ctypes.sizeof(_SchedAttr), policy=policy, nice=os.getpriority(os.PRIO_PROCESS, 0),
                      runtime=SOLVE_SLICE_NS)
    try:
        return ctypes.CDLL(None, use_errno=True).syscall(number, 0, ctypes.byref(attr), 0) == 0
    except (OSError, AttributeError):
        return False


def _own_autogroup(nice: int) -> None:
    """Put this process in a scheduling group of its own, weighted at ``nice``.

    With autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``, the default of many
    distributions), the kernel shares CPU time between sessions first and applies a process's nice
    value only against the other processes of its own session: a niced solve in the worker's session
    would still take a full session's share from a replica in another session (measured:
    benchmarks/scale_out.py). A new session makes a new autogroup, whose nice is this process's
    ``/proc/self/autogroup``. Inside a container or a systemd service (a cgroup of its own) autogroup
    does not apply and this changes nothing; there the service's CPU weight is the tool
    (docs/scale-out.md).
    """
    try:
        os.setsid()
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(nice))
    except OSError:  # no autogroup support, or already a session leader: the nice value alone
        pass

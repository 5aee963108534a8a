"""A solve at a lower OS priority (``pipesched worker --nice N|idle``): the body of the solve process.

On a host that also runs an API replica (or anything a person waits on), solves are the work that
can wait. ``--nice 10`` (the default) gives a solve about a tenth of a core's share against a
normal-priority process that wants the core (Linux CFS weights 110 vs 1024) while it still uses
every idle cycle; a woken request handler may still wait for the solve's current time slice (a few
ms). ``--nice idle`` puts the solve in Linux's ``SCHED_IDLE`` class: it runs only on a core nothing
else wants, and any other task that wakes preempts it at once (the best latency for the replica),
at the price of next to no progress on a host that is busy with other work. Only the solve
process is lowered; the worker's own loop (claims, heartbeats) keeps normal priority, so a busy
host does not starve the heartbeats and have its jobs taken over. ``--nice 0`` turns it off.
"""

from __future__ import annotations

import os
from multiprocessing.connection import Connection

from ..solving import worker

#: ``--nice`` value for the ``SCHED_IDLE`` scheduling class.
IDLE = "idle"


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


def lower_priority(nice: int | str) -> None:
    """Lower this process's priority as ``--nice`` asks (Linux; elsewhere ``idle`` falls back to nice 19)."""
    if nice in (0, "0"):
        return
    _own_autogroup(19 if nice == IDLE else int(nice))
    if nice == IDLE:
        if hasattr(os, "SCHED_IDLE"):
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            return
        nice = 19
    if isinstance(nice, int) and nice > 0:
        os.nice(nice)


def run_solve_niced(conn: Connection, nice: int | str, problem_json: str, method: str, time_limit_s: float,
                    hint_json: str | None, workers: int) -> None:
    lower_priority(nice)
    worker.run_solve(conn, problem_json, method, time_limit_s, hint_json, workers)


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

"""Which processes are still alive, read from ``/proc``: for the tests that stop a command or a
solve and check that nothing it started outlives it."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path


def _stats() -> list[tuple[int, str, list[str]]]:
    """(pid, command name, the fields after the name) of every live process."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        if fields and fields[0] != "Z":
            found.append((int(stat.parent.name), name, fields))
    return found


def session_processes(sid: int) -> list[int]:
    """The live processes of session ``sid`` (a command started with ``start_new_session``)."""
    return [pid for pid, _, fields in _stats() if int(fields[3]) == sid]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time process ``pid`` has used (0 once it is gone)."""
    for p, _, fields in _stats():
        if p == pid:
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


def busy_child(sid: int, cpu_s: float) -> bool:
    """A process of session ``sid`` other than its leader has used ``cpu_s`` of CPU: a readiness signal
    for "the solve in the child is under way" that needs no guess at how long it takes to start."""
    return any(cpu_seconds(pid) >= cpu_s for pid in session_processes(sid) if pid != sid)


def group_members(pgid: int) -> list[tuple[int, str]]:
    """(pid, command name) of the live processes in process group ``pgid``."""
    return [(pid, name) for pid, name, fields in _stats() if int(fields[2]) == pgid]


def wait_for(predicate: Callable[[], object], seconds: float) -> bool:
    """Poll ``predicate`` until it holds or ``seconds`` pass; its last value as a bool."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


def as_from_a_terminal() -> None:
    """``preexec_fn`` for a command a test interrupts with SIGINT: Ctrl-C's default action, as a shell
    gives a foreground job. A child inherits an ignored SIGINT and Python then leaves it ignored, so a
    test process that ran some ignoring code earlier (pytest's worker runs many tests) would start a
    command Ctrl-C cannot stop, and the test would fail for a reason that is not the command's."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)

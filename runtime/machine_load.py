"""How much CPU *other* processes used while our ranks were measured.

The load average is the wrong witness for a replay: it counts our own ranks, and it lags by a
minute, so a benchmark's own profiling a moment earlier reads as "the machine is busy". What a
measurement needs to know is whether something else took cores from it while it ran. Each rank
takes a :func:`cpu_mark` before and after its timed steps; :func:`other_cores` subtracts the
ranks' own CPU time from the machine's non-idle time over the same window (Linux ``/proc/stat``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_PROC_STAT = Path("/proc/stat")
_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# /proc/stat's first line: user nice system idle iowait irq softirq steal guest guest_nice (ticks);
# busy is all but idle and iowait, and guest time is already inside user, so the sum stops at steal
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)
# below this many cores' worth of other work a measurement counts as taken on a quiet machine:
# /proc/stat counts in 10 ms ticks and a replay window is a second or two, so a few ticks of
# daemons (or of the parent waiting on the ranks) are noise, not load
QUIET_CORES = 0.25


@dataclass(frozen=True)
class CpuMark:
    """One process's view at one moment: the monotonic clock (shared by every process on the
    machine), the machine's non-idle CPU seconds (None where ``/proc/stat`` is missing) and this
    process's own CPU seconds, all threads (gloo's included)."""

    wall_s: float
    machine_busy_s: float | None
    own_cpu_s: float


def _machine_busy_s() -> float | None:
    try:
        fields = [int(x) for x in _PROC_STAT.read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    return sum(fields[i] for i in _BUSY_FIELDS if i < len(fields)) / _TICKS_PER_S


def cpu_mark() -> CpuMark:
    """Take a mark now; pair one before and one after the measured work."""
    return CpuMark(time.monotonic(), _machine_busy_s(), time.process_time())


def other_cores(marks: Sequence[tuple[CpuMark, CpuMark]]) -> float | None:
    """Cores' worth of CPU used by processes other than the marked ones, from one ``(start, end)``
    pair per marked process, between the earliest start and the latest end; None without ``/proc/stat``."""
    if not marks:
        raise ValueError("other_cores: needs a (start, end) pair of marks per measured process")
    first = min((s for s, _ in marks), key=lambda m: m.wall_s)
    last = max((e for _, e in marks), key=lambda m: m.wall_s)
    if first.machine_busy_s is None or last.machine_busy_s is None or last.wall_s <= first.wall_s:
        return None
    own = sum(e.own_cpu_s - s.own_cpu_s for s, e in marks)
    return max(0.0, (last.machine_busy_s - first.machine_busy_s - own) / (last.wall_s - first.wall_s))


def describe(other: float | None, cores: int) -> str:
    """One phrase for a report: how much of the machine other work took while we measured."""
    if other is None:
        return "other work on the machine: not measurable here (no /proc/stat)"
    quiet = "quiet" if other < QUIET_CORES else "busy: measured times carry other work"
    return f"other processes used {other:.2f} of {cores} cores while it ran ({quiet})"

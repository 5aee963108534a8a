"""other_cores tells other processes' CPU apart from the marked processes' own, on the real
/proc/stat: the same busy loop counts when another process runs it and not when we do."""

from __future__ import annotations

import select
import subprocess
import sys
import time

import pytest

from pipesched.runtime.machine_load import CpuMark, cpu_mark, describe, other_cores

SPIN_S = 1.0


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


#: The child says it is about to spin; the window opens when the parent reads that line.
SPINNING = "print('spinning', flush=True)\nwhile True: pass"


def _window_with_child_spinning() -> float:
    child = subprocess.Popen([sys.executable, "-c", SPINNING], stdout=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([child.stdout], [], [], 60)
        assert ready and child.stdout.readline() == "spinning\n", "the spinning child did not start"
        start = cpu_mark()
        time.sleep(SPIN_S)  # the measured window: we idle while the child spins
        end = cpu_mark()
    finally:
        child.kill()
        child.wait()
    return other_cores([(start, end)])


def _window_spinning_ourselves() -> float:
    start = cpu_mark()
    _spin(SPIN_S)
    end = cpu_mark()
    return other_cores([(start, end)])


@pytest.mark.exclusive  # it measures other processes' CPU: the other xdist worker would count as one
def test_another_process_counts_and_our_own_work_does_not() -> None:
    theirs = _window_with_child_spinning()
    ours = _window_spinning_ourselves()
    assert theirs is not None and ours is not None
    assert theirs >= 0.5, theirs  # a spinning process holds most of a core while we sleep
    assert theirs - ours >= 0.4, (theirs, ours)  # the same spin in our own process is subtracted
    assert "busy" in describe(theirs, 2)


def test_marks_must_pair_and_missing_proc_stat_says_so() -> None:
    a = CpuMark(wall_s=1.0, machine_busy_s=None, own_cpu_s=0.0)
    b = CpuMark(wall_s=2.0, machine_busy_s=None, own_cpu_s=0.5)
    with pytest.raises(ValueError, match="a \\(start, end\\) pair of marks per measured process"):
        other_cores([])
    assert other_cores([(a, b)]) is None
    assert "not measurable" in describe(None, 2)
    # two processes: the window spans both; their own CPU is taken out of the machine's
    s = [CpuMark(10.0, 100.0, 1.0), CpuMark(10.5, 100.2, 2.0)]
    e = [CpuMark(12.0, 104.0, 2.5), CpuMark(11.5, 103.9, 3.0)]
    assert other_cores(list(zip(s, e, strict=True))) == pytest.approx((104.0 - 100.0 - 1.5 - 1.0) / 2.0)

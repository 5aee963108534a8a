"""``--nice idle`` puts a solve in an idle CPU cgroup under its own cgroup, or falls back to an autogroup."""

from __future__ import annotations

import multiprocessing as mp
import os
from pathlib import Path

from pipesched.api.scaleout.idle_cgroup import (
    IDLE_GROUP,
    CpuHierarchy,
    join_idle_cgroup,
    own_cpu_cgroup,
)

V1 = """31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
V1_OWN = "4:memory:/x\n2:cpu,cpuacct:/system.slice/worker.service\n0::/\n"
V2 = "28 23 0:25 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"


def test_the_v1_cpu_hierarchy_is_preferred_and_the_own_path_is_kept() -> None:
    found = own_cpu_cgroup(V1, V1_OWN)
    assert found == CpuHierarchy(Path("/sys/fs/cgroup/cpu,cpuacct/system.slice/worker.service"), 1)


def test_the_unified_hierarchy_is_used_when_there_is_no_v1_cpu() -> None:
    assert own_cpu_cgroup(V2, "0::/user.slice/a.scope\n") == CpuHierarchy(Path("/sys/fs/cgroup/user.slice/a.scope"), 2)


def test_a_container_mount_of_a_subtree_maps_the_own_path_into_it() -> None:
    mounted = "50 40 0:29 /docker/abc /sys/fs/cgroup/cpu ro,relatime - cgroup cgroup rw,cpu\n"
    assert own_cpu_cgroup(mounted, "3:cpu:/docker/abc/inner\n") == CpuHierarchy(Path("/sys/fs/cgroup/cpu/inner"), 1)


def test_no_cpu_controller_gives_none() -> None:
    assert own_cpu_cgroup("35 31 0:32 / /m rw - cgroup cgroup rw,memory\n", "4:memory:/\n") is None


def test_joining_writes_the_idle_flag_and_the_pid_under_the_own_group(tmp_path: Path) -> None:
    """On a directory standing in for the cgroup file system: the files the kernel reads are written."""
    (tmp_path / "cgroup.subtree_control").write_text("memory\n")
    group = join_idle_cgroup(CpuHierarchy(tmp_path, 2))
    assert group == tmp_path / IDLE_GROUP
    assert (group / "cpu.idle").read_text() == "1" and (group / "cgroup.procs").read_text() == str(os.getpid())
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+cpu"


def test_an_unwritable_hierarchy_changes_nothing_and_says_so(tmp_path: Path) -> None:
    assert join_idle_cgroup(CpuHierarchy(tmp_path / "missing", 1)) is None
    assert not (tmp_path / "missing").exists()


def _lowered(conn) -> None:  # noqa: ANN001
    from pipesched.api.scaleout.lowprio import lower_priority

    how = lower_priority("idle")
    conn.send((how, Path("/proc/self/cgroup").read_text(), Path("/proc/self/autogroup").read_text(),
               os.sched_getscheduler(0) == os.SCHED_IDLE))


def test_an_idle_solve_process_is_in_the_idle_cgroup_or_else_in_a_nice_19_autogroup() -> None:
    """The real kernel: where cgroups are writable (CI runs as root) the solve is in the idle group
    (``cpu.idle`` reads 1); elsewhere it is SCHED_IDLE in an autogroup of its own at nice 19."""
    receiver, sender = mp.get_context("fork").Pipe(duplex=False)
    proc = mp.get_context("fork").Process(target=_lowered, args=(sender,))
    proc.start()
    got = receiver.recv() if receiver.poll(30) else None
    proc.join(10)
    assert got is not None
    how, cgroups, autogroup, sched_idle = got
    assert sched_idle
    if how.startswith("idle cgroup "):
        group = Path(how.removeprefix("idle cgroup "))
        assert group.name == IDLE_GROUP and (group / "cpu.idle").read_text().strip() == "1"
        assert any(line.split(":", 2)[2].endswith("/" + IDLE_GROUP) for line in cgroups.splitlines()
                   if "cpu" in line.split(":", 2)[1].split(",") or line.startswith("0::")), cgroups
    else:
        assert how == "SCHED_IDLE in an autogroup at nice 19" and autogroup.strip().endswith("nice 19"), (how, autogroup)

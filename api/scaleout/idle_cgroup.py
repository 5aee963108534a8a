"""Put a solve process in an *idle* CPU cgroup (``cpu.idle = 1``), the group form of ``SCHED_IDLE``.

Why not ``SCHED_IDLE`` alone: the kernel compares a woken task with the running one at the level
where their scheduling groups meet. A replica and a solve in different groups (autogroups of two
sessions, or two cgroups) meet as *groups*, and a group is idle only when its cgroup says so. So a
``SCHED_IDLE`` solve in a group of its own is not preempted at once by a woken replica: the replica
waits for the next scheduler tick (4 ms at ``HZ=250``), which is the cache-hit tail measured by
``benchmarks/scale_out.py``. In a cgroup marked idle, the solve's whole group yields to any
non-idle group the moment that one wakes.

The idle group is created *under this process's own* CPU cgroup (``<own>/pipesched-idle``), so a
worker confined by a service or container keeps its limits: the solve escapes nothing. It needs a
writable cgroup file system (root, or a delegated subtree); where there is none (most containers,
non-Linux) the caller falls back to ``SCHED_IDLE`` in an autogroup of its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

#: Name of the idle cgroup created under the worker's own CPU cgroup (shared by its solves).
IDLE_GROUP = "pipesched-idle"


@dataclass(frozen=True)
class CpuHierarchy:
    """Where this process's CPU controller lives: the directory of its cgroup and the version."""

    directory: Path
    version: int  # 1: the v1 "cpu" hierarchy; 2: the unified hierarchy


def own_cpu_cgroup(mountinfo: str, cgroups: str) -> CpuHierarchy | None:
    """The directory of this process's CPU cgroup, from ``/proc/self/mountinfo`` and
    ``/proc/self/cgroup`` texts (a v1 ``cpu`` hierarchy first, else the unified one); None if neither."""
    own: dict[str, str] = {}
    for line in cgroups.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else ["(unified)"]:
                own[controller] = parts[2]
    mounts: dict[str, tuple[str, str]] = {}  # "cpu" or "(unified)" -> (mount root, mount point)
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        sep = fields.index("-")
        fstype, options = fields[sep + 1], fields[sep + 3] if len(fields) > sep + 3 else ""
        if fstype == "cgroup" and "cpu" in options.split(","):
            mounts.setdefault("cpu", (fields[3], fields[4]))
        elif fstype == "cgroup2":
            mounts.setdefault("(unified)", (fields[3], fields[4]))
    for controller, version in (("cpu", 1), ("(unified)", 2)):
        if controller in own and controller in mounts:
            root, point = mounts[controller]
            path = own[controller]
            if root != "/" and (path == root or path.startswith(root.rstrip("/") + "/")):
                path = path[len(root.rstrip("/")):] or "/"
            return CpuHierarchy(Path(point) / path.lstrip("/"), version)
    return None


def join_idle_cgroup(hierarchy: CpuHierarchy | None = None) -> Path | None:
    """Move this process into ``<own cpu cgroup>/pipesched-idle`` with ``cpu.idle = 1``.

    Returns the group's directory, or None when the cgroup file system does not allow it (nothing
    is changed then). On the unified hierarchy the CPU controller must be enabled for the child,
    which the kernel allows only where the parent holds no processes (the root, or a delegated
    subtree set up that way)."""
    if hierarchy is None:
        try:
            hierarchy = own_cpu_cgroup(Path("/proc/self/mountinfo").read_text(), Path("/proc/self/cgroup").read_text())
        except OSError:
            return None
        if hierarchy is None:
            return None
    group = hierarchy.directory / IDLE_GROUP
    try:
        if hierarchy.version == 2:
            control = hierarchy.directory / "cgroup.subtree_control"
            if "cpu" not in control.read_text().split():
                control.write_text("+cpu")
        group.mkdir(exist_ok=True)
        (group / "cpu.idle").write_text("1")
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        return None
    return group

"""The common tail of every benchmark script: how it was called, what it ran on, where its table goes.

A figure means little without the code and the machine that made it: this project's machine has
2 cores shared with other jobs, so the load average around a run matters as much as the commit.
``publish`` therefore ends every results file with a provenance section (commit, load average
before and after, cores, CPU model, memory, Python and the versions of the packages that do the
work). "Before" is the load when this module was imported, which every script does first.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

#: Heading of the section ``publish`` appends; tests that read figures stop at it.
PROVENANCE_HEADING = "## Provenance"

#: The packages whose versions change what a benchmark measures.
KEY_PACKAGES = ("ortools", "pulp", "highspy", "fastapi", "starlette", "uvicorn", "pydantic",
                "sqlalchemy", "httpx", "torch", "numpy")

_REPO = Path(__file__).resolve().parent.parent
_LOAD_AT_IMPORT = os.getloadavg()


def command_line(script: str, argv: list[str] | None) -> str:
    """The command that re-runs a benchmark as it was called (quoted in its results file)."""
    args = argv if argv is not None else sys.argv[1:]
    return f"python benchmarks/{script}" + "".join(f" {a}" for a in args)


def _git(*args: str) -> str:
    result = subprocess.run(["git", *args], cwd=_REPO, capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def commit() -> str:
    """``git rev-parse --short HEAD``, plus which tracked files differ from it when the tree is dirty
    (the figures then come from code no commit holds)."""
    try:
        head = _git("rev-parse", "--short", "HEAD").strip()
        changed = [line[3:] for line in _git("status", "--porcelain", "--untracked-files=no").splitlines()]
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as e:
        return f"unknown ({e})"
    if not changed:
        return head
    shown = ", ".join(changed[:6]) + (", ..." if len(changed) > 6 else "")
    return f"{head} dirty (tracked files changed: {len(changed)}: {shown})"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    return "unknown memory"


def machine() -> str:
    """Cores (and how many this process may use), CPU model, memory, OS."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (f"{os.cpu_count()} cores ({usable} usable), {_cpu_model()}, {_memory_gib()}, "
            f"{platform.system()} {platform.release()}")


def versions() -> str:
    """Python and the key packages that are installed (absent ones are left out)."""
    found = []
    for name in KEY_PACKAGES:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return f"Python {platform.python_version()}; " + ", ".join(found)


def _load(load: tuple[float, float, float]) -> str:
    return " / ".join(f"{x:.2f}" for x in load)


def provenance(load_before: tuple[float, float, float] | None = None) -> str:
    """The markdown section ``publish`` appends: commit, load (1/5/15 min) before and after, machine."""
    before = load_before or _LOAD_AT_IMPORT
    return "\n".join([
        PROVENANCE_HEADING,
        "",
        f"- commit: {commit()}",
        f"- load average (1 / 5 / 15 min): {_load(before)} before, {_load(os.getloadavg())} after",
        f"- machine: {machine()}",
        f"- software: {versions()}",
        "",
    ])


def publish(text: str, out: Path, load_before: tuple[float, float, float] | None = None) -> None:
    """Print the markdown table and write it to ``out`` (the results file the README links to),
    ending with the provenance section."""
    full = text.rstrip("\n") + "\n\n" + provenance(load_before)
    print(full)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(full)

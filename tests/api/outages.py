"""Real outages for the store tests: a small tmpfs that fills up, and a PostgreSQL cluster of the
test's own (``initdb`` with the machine's binaries, on a free port) that the test stops and starts.
The machine's shared PostgreSQL on 5432 is never touched.

Without the means (not root for ``mount``; no PostgreSQL binaries) the tests skip, and fail under
``PIPESCHED_REQUIRE_POSTGRES=1`` (CI), which runs as root with the binaries installed.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from api_servers import free_port


def need(what: str, ok: bool) -> None:
    if ok:
        return
    if os.environ.get("PIPESCHED_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"PIPESCHED_REQUIRE_POSTGRES=1 but {what}")
    pytest.skip(what)


@contextlib.contextmanager
def small_disk(size: str = "2m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted for the test (root only), unmounted after."""
    need("mounting a tmpfs needs root", os.geteuid() == 0 and shutil.which("mount") is not None)
    path = Path(tempfile.mkdtemp(prefix="pipesched-disk-"))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                          text=True)
    need(f"cannot mount a tmpfs: {done.stderr.strip()}", done.returncode == 0)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)
        shutil.rmtree(path, ignore_errors=True)


def fill(path: Path) -> Path:
    """Write a file into ``path`` until the file system is full; returns it (delete it to free the space)."""
    filler = path / "filler"
    with contextlib.suppress(OSError), open(filler, "wb") as f:
        while True:
            f.write(b"\0" * 4096)
            f.flush()
    return filler


class Postgres:
    """A throwaway PostgreSQL cluster: ``start()``, ``stop()`` (immediate), ``close()`` removes it."""

    def __init__(self) -> None:
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
        need("no PostgreSQL binaries under /usr/lib/postgresql/*/bin", bool(bins))
        self.bin, self.port = Path(bins[-1]), free_port()
        self.root = Path(tempfile.mkdtemp(prefix="pipesched-pg-"))
        self.root.chmod(0o755)
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_user:
            shutil.chown(self.root, "postgres", "postgres")
        self._run("initdb", "-D", str(self.root / "data"), "-A", "trust", "-U", "postgres", "--no-sync")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run([*self.as_user, str(self.bin / tool), *args], capture_output=True, text=True,
                              timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed: {done.stdout}{done.stderr}")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run("pg_ctl", "-D", str(self.root / "data"), "-l", str(self.root / "log"), "-o", options, "-w", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

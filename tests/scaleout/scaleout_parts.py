"""Real parts for the scale-out tests (helpers; the fixtures are in conftest.py): a fresh PostgreSQL database per module, ``pipesched serve
--workers external`` replicas and ``pipesched worker`` processes on loopback.

Missing pieces (the ``scaleout`` or ``ray`` extra, the PostgreSQL server) skip the tests locally
and fail them when ``PIPESCHED_REQUIRE_SCALEOUT=1`` (CI).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"


def need(what: str, ok: bool) -> None:
    """Skip without ``what``, or fail when CI requires the scale-out tests to run."""
    if ok:
        return
    if os.environ.get("PIPESCHED_REQUIRE_SCALEOUT") == "1":
        pytest.fail(f"PIPESCHED_REQUIRE_SCALEOUT=1 but {what}")
    pytest.skip(what)


def need_module(module: str, extra: str) -> None:
    need(f"{module} is not installed (pip install -e '.[{extra}]')", importlib.util.find_spec(module) is not None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def admin_sql(url: str, sql: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn, conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall() if cur.description else []


class Proc:
    """A ``pipesched`` sub-command in its own process group, with a log file and a hard lifetime."""

    def __init__(self, args: list[str], log: Path, lifetime_s: float = 600) -> None:
        env = {**os.environ, "PIPESCHED_KILL_GRACE_S": "10", "OMP_NUM_THREADS": "1"}
        self.log = log
        self.proc = subprocess.Popen(
            ["timeout", "-s", "KILL", str(int(lifetime_s)), sys.executable, "-m", "pipesched", *args],
            env=env, stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True)  # noqa: SIM115

    def pid(self) -> int:
        """The python process (``timeout`` is its parent)."""
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True).stdout.split()
        return int(out[0]) if out else -1

    def kill9(self) -> None:
        """SIGKILL the pipesched process alone: what a crash or the OOM killer does."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid(), signal.SIGKILL)

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)


class Replica(Proc):
    def __init__(self, db: str, log: Path) -> None:
        self.port = free_port()
        super().__init__(["serve", "--port", str(self.port), "--db", db, "--workers", "external"], log)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"replica exited with {self.proc.returncode}: {log.read_text()[-2000:]}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            time.sleep(0.2)
        raise RuntimeError("replica did not become healthy in 90 s")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def post(self, body: dict, **kwargs) -> httpx.Response:  # noqa: ANN003
        return httpx.post(f"{self.url}/v1/solve", json=body, timeout=120, **kwargs)

    def job(self, job_id: str) -> dict:
        r = httpx.get(f"{self.url}/v1/jobs/{job_id}", timeout=30)
        assert r.status_code == 200, r.text
        return r.json()

    def wait_job(self, job_id: str, timeout_s: float = 120) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            job = self.job(job_id)
            if job["state"] in ("done", "failed"):
                return job
            time.sleep(0.2)
        raise AssertionError(f"job {job_id} not finished after {timeout_s} s: {job}")


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (Linux ``/proc``)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            children.setdefault(int(stat.read_text().rsplit(")", 1)[1].split()[1]), []).append(int(stat.parent.name))
    out, todo = [], [root]
    while todo:
        kids = children.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def nice_of(pid: int) -> int:
    """The nice value of a process (field 19 of ``/proc/PID/stat``)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def start_worker(db: str, log: Path, *flags: str) -> Proc:
    return Proc(["worker", "--db", db, "--heartbeat-timeout", "3", "--log-level", "info", *flags], log)


def fresh_database(admin: str) -> str:
    """A new empty database on the server of ``admin`` (drop it with :func:`drop_database`)."""
    name = f"pipesched_race_{os.getpid()}_{time.monotonic_ns() % 10**9}"
    admin_sql(admin, f"CREATE DATABASE {name}")
    return f"{admin.rsplit('/', 1)[0]}/{name}"


def drop_database(admin: str, url: str) -> None:
    admin_sql(admin, f"DROP DATABASE IF EXISTS {url.rsplit('/', 1)[1]} WITH (FORCE)")


def start_at_once(db: str, logs: Path) -> tuple[list[int], list[Proc]]:
    """Two ``serve --workers external`` replicas and a worker started at the same instant on ``db``;
    returns the replicas' ports and the three processes (stop them after)."""
    ports = [free_port(), free_port()]
    procs = [Proc(["serve", "--port", str(port), "--db", db, "--workers", "external"], logs / f"replica{i}.log")
             for i, port in enumerate(ports)]
    procs.append(start_worker(db, logs / "worker.log"))
    return ports, procs


def all_up(ports: list[int], procs: list[Proc], hang_s: float = 90) -> str | None:
    """None once both replicas answer /healthz 200 and the worker says it is solving; otherwise what
    went wrong (a process that exited, with its log's last line)."""
    end = time.monotonic() + hang_s
    while time.monotonic() < end:
        for proc in procs:
            if proc.proc.poll() is not None:
                lines = proc.log.read_text().strip().splitlines()
                return f"{proc.log.name}: exited {proc.proc.returncode}: {lines[-1] if lines else ''}"
        healthy = 0
        for port in ports:
            with contextlib.suppress(httpx.TransportError):
                healthy += httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
        if healthy == len(ports) and "solving up to" in procs[-1].log.read_text():
            return None
        time.sleep(0.1)
    return f"not all up after {hang_s:g} s"

"""Real servers for the service tests: ``pipesched serve`` in a subprocess on a free loopback port.

PostgreSQL comes from ``PIPESCHED_TEST_POSTGRES_URL``; with ``PIPESCHED_REQUIRE_POSTGRES=1``
(as ``.ci/run`` sets) a missing server fails the tests instead of skipping them. Each run uses
its own table prefix there and drops its tables at the end, so parallel runs do not collide.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pipesched.api.store import Store

SMALL = {"devices": 2, "microbatches": 4}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One ``pipesched serve`` process; ``restart`` keeps the port, db and settings."""

    def __init__(self, db: str, env: dict[str, str] | None = None, token: str | None = None,
                 log: Path | None = None) -> None:
        self.db, self.token, self.port = db, token, free_port()
        self.env = {**os.environ, "PIPESCHED_KILL_GRACE_S": "10", **(env or {})}
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Server:
        args = [sys.executable, "-m", "pipesched", "serve", "--port", str(self.port), "--db", self.db]
        if self.token:
            args += ["--token", self.token]
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(args, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}; log: {self.log}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError("server did not become healthy in 60 s")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill9()
        self._reap_group()

    def kill9(self) -> None:
        """SIGKILL the server alone (its solver processes notice and exit on their own)."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def _reap_group(self) -> None:
        """Make sure nothing this server started outlives the test (its own process group)."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    def restart(self) -> Server:
        self.stop()
        return self.start()

    def post(self, body: dict, **kwargs) -> httpx.Response:  # noqa: ANN003
        return httpx.post(f"{self.url}/v1/solve", json=body, timeout=60, **kwargs)

    def get(self, path: str, **kwargs) -> httpx.Response:  # noqa: ANN003
        return httpx.get(f"{self.url}{path}", timeout=60, **kwargs)

    def metric(self, series: str) -> float:
        """Value of one series, e.g. ``pipesched_solves_total{outcome="ok"}``."""
        for line in self.get("/metrics").text.splitlines():
            if line.split(" ")[0] == series:
                return float(line.rsplit(" ", 1)[1])
        raise KeyError(series)


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator:
    """Factory for servers that are all stopped (and their process groups reaped) after the test."""
    made: list[Server] = []

    def make(db: str | None = None, **kwargs) -> Server:  # noqa: ANN003
        server = Server(db or f"sqlite:///{tmp_path / 'cache.db'}", log=tmp_path / f"server{len(made)}.log", **kwargs)
        made.append(server)
        return server

    yield make
    for server in made:
        server.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A shared server on a fresh SQLite file (for tests that only add entries)."""
    path = tmp_path_factory.mktemp("shared")
    s = Server(f"sqlite:///{path / 'cache.db'}", log=path / "server.log").start()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def postgres_url() -> str:
    url = os.environ.get("PIPESCHED_TEST_POSTGRES_URL")
    required = os.environ.get("PIPESCHED_REQUIRE_POSTGRES") == "1"
    if not url:
        if required:
            pytest.fail("PIPESCHED_REQUIRE_POSTGRES=1 but PIPESCHED_TEST_POSTGRES_URL is not set")
        pytest.skip("PostgreSQL tests need PIPESCHED_TEST_POSTGRES_URL")
    try:
        Store(url, f"probe{uuid.uuid4().hex[:8]}_").drop()
    except Exception as e:
        if required:
            pytest.fail(f"PostgreSQL expected at {url} but unusable: {e}")
        pytest.skip(f"no PostgreSQL at {url}: {e}")
    return url


@pytest.fixture
def pg_prefix(postgres_url: str) -> Iterator[str]:
    """A table prefix private to this test; its tables are dropped afterwards."""
    prefix = f"t{uuid.uuid4().hex[:12]}_"
    yield prefix
    Store(postgres_url, prefix).drop()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(url, table prefix) for both back-ends."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}", ""
    else:
        url = request.getfixturevalue("postgres_url")
        yield url, request.getfixturevalue("pg_prefix")

"""Helpers for the service tests: a real ``pipesched serve`` process on a free loopback port."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

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

    def wait_healthy(self, hang_s: float = 60) -> bool:
        """Poll ``/healthz`` until it answers 200 (True) or ``hang_s`` passes (False)."""
        end = time.monotonic() + hang_s
        while time.monotonic() < end:
            with contextlib.suppress(httpx.TransportError):
                if self.get("/healthz").status_code == 200:
                    return True
            time.sleep(0.1)
        return False

    def wait_job(self, job: str, hang_s: float = 120) -> dict:
        """The job's report once it is done or failed. ``hang_s`` only stops a hung test; it is no
        claim about speed (speed is measured in benchmarks/)."""
        end = time.monotonic() + hang_s
        while (data := self.get(f"/v1/jobs/{job}").json())["state"] not in ("done", "failed"):
            if time.monotonic() > end:
                raise TimeoutError(f"job {job} still {data['state']} after {hang_s:g} s")
            time.sleep(0.1)
        return data

    def metric(self, series: str) -> float:
        """Value of one series, e.g. ``pipesched_solves_total{outcome="ok"}``."""
        for line in self.get("/metrics").text.splitlines():
            if line.split(" ")[0] == series:
                return float(line.rsplit(" ", 1)[1])
        raise KeyError(series)

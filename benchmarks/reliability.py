"""Reliability under an operator's bad day, against real servers on loopback: a trainer fleet, kill -9
of the service, a full disk, a PostgreSQL restart, replicas racing on an empty database, a slow body.

Each scenario prints its figure; the table goes to benchmarks/results/reliability.md.

- fleet: N trainer threads (the real ``Client``, ``fallback="local"``) ask for P distinct problems
  (``auto``, 1 s) at once from one service (2 solver processes, 32 queued): how many got a schedule,
  from the service or their local fallback, how many raised, and the service's 5xx count;
- kill -9: two solves in flight (CP-SAT, and the ILP with its CBC child), the service SIGKILLed: how
  long until no process it started is alive;
- disk full: the SQLite cache on a 2 MB tmpfs filled up (needs root to mount; otherwise reported as
  not run): solves still answered 200 with the not-stored warning, /healthz 503, healthy again once
  space is freed;
- PostgreSQL restart: a cluster of its own (initdb on a free port) stopped for S s under a steady load
  of hits and misses: answers by status, the slowest 503, and whether it resumed unattended;
- replica race: two ``--workers external`` replicas and a worker started at one instant on an empty
  database, R times: how many came up;
- slow body: 13 of 1000 announced bytes, then silence: when the service cut it (default body_timeout_s).

    nice -n 10 python benchmarks/reliability.py           # 512 trainers, 64 problems, 5 races, 10 s outage
    nice -n 10 python benchmarks/reliability.py --quick   # 128 trainers, 16 problems, 2 races, 3 s outage
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "tests" / "api"))
from outages import Postgres  # noqa: E402  (a throwaway cluster: initdb on a free port; shared with the tests)
from report import command_line, publish  # noqa: E402

from pipesched.client import Client  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "reliability.md"
#: The named figures the README quotes (the JSON beside the results file).
FIGURES: dict[str, float | int] = {}
ADMIN_PG = os.environ.get("PIPESCHED_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
HARD_CPSAT = {
    "devices": 4, "microbatches": 12, "stages_per_device": 2, "objective": "stage_span",
    "costs": {"forward": [1.0, 1.3, 0.9, 1.1, 1.2, 0.8, 1.05, 1.15],
              "backward_input": [1.1, 1.0, 1.2, 0.9, 1.3, 1.0, 1.1, 0.95],
              "backward_weight": [0.7, 0.9, 0.8, 1.0, 0.6, 0.85, 0.75, 0.9], "comm": 0.1},
    "memory": {"forward": 1.0, "backward_input": 0.0, "backward_weight": -1.0, "limit": 5}}
SLOW_ILP = {"devices": 4, "microbatches": 12, "objective": "stage_span",
            "costs": {"forward": [1.0, 2.0, 1.5, 1.0], "backward_input": [2.0, 1.0, 1.0, 3.0],
                      "backward_weight": [1.0, 1.0, 2.0, 1.0]}, "memory": {"limit": 3}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    """``pipesched serve`` (or another sub-command) in its own session, with a log."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = log
        self.proc = subprocess.Popen([sys.executable, "-m", "pipesched", *args], stdout=open(log, "ab"),  # noqa: SIM115
                                     stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, **(env or {})})

    @classmethod
    def serve(cls, db: str, log: Path, env: dict[str, str] | None = None, external: bool = False) -> Service:
        port = free_port()
        args = ["serve", "--port", str(port), "--db", db] + (["--workers", "external"] if external else [])
        service = cls(args, log, env)
        service.url = f"http://127.0.0.1:{port}"
        return service

    url = ""

    def healthy(self, hang_s: float = 90) -> bool:
        end = time.monotonic() + hang_s
        while time.monotonic() < end and self.proc.poll() is None:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.url}/healthz", timeout=3).status_code == 200:
                    return True
            time.sleep(0.1)
        return False

    def session(self) -> list[int]:
        """Live processes of this service's session (it and everything it started)."""
        out = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = stat.read_text().rsplit(")", 1)[1].split()
                if fields[0] != "Z" and int(fields[3]) == self.proc.pid:
                    out.append(int(stat.parent.name))
        return out

    def statuses(self) -> Counter[int]:
        counts: Counter[int] = Counter()
        for line in httpx.get(f"{self.url}/metrics", timeout=10).text.splitlines():
            if line.startswith("pipesched_http_requests_total{"):
                counts[int(line.split('status="')[1].split('"')[0])] += int(float(line.rsplit(" ", 1)[1]))
        return counts

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)


def fleet(tmp: Path, trainers: int, problems: int) -> list[str]:
    service = Service.serve(f"sqlite:///{tmp / 'fleet.db'}", tmp / "fleet.log")
    try:
        assert service.healthy(), "the service did not start"
        outcome: Counter[str] = Counter()
        lock, go = threading.Lock(), threading.Event()

        def trainer(i: int) -> None:
            problem = {"devices": 4, "microbatches": 8 + i % problems}
            go.wait()
            with warnings.catch_warnings(record=True) as caught, \
                    Client(service.url, fallback="local", cache_dir=False) as client:
                warnings.simplefilter("always")
                try:
                    client.solve(problem, method="auto", time_limit_s=1)
                    kind = "local" if any("on this machine" in str(w.message) for w in caught) else "service"
                except Exception as e:  # what the issue saw: ServiceError 429
                    kind = f"raised {type(e).__name__}"
            with lock:
                outcome[kind] += 1

        t0 = time.monotonic()
        with ThreadPoolExecutor(trainers) as pool:
            futures = [pool.submit(trainer, i) for i in range(trainers)]
            go.set()
            for f in futures:
                f.result()
        seconds = time.monotonic() - t0
        served = outcome["service"] + outcome["local"]
        codes = service.statuses()
        raised = sum(n for k, n in outcome.items() if k.startswith("raised"))
        FIGURES.update(fleet_served=served, fleet_trainers=trainers, fleet_raised=raised, fleet_500s=codes[500])
        return [f"| fleet: {trainers} trainers, {problems} problems | **{served} of {trainers} served** "
                f"({outcome['service']} by the service, {outcome['local']} by their local fallback), {raised} raised; "
                f"service answers {dict(sorted(codes.items()))}, **500s {codes[500]}**; "
                f"{seconds:.0f} s |"]
    finally:
        service.stop()


def kill9(tmp: Path) -> list[str]:
    service = Service.serve(f"sqlite:///{tmp / 'kill.db'}", tmp / "kill.log")
    assert service.healthy(), "the service did not start"
    for problem, method in ((HARD_CPSAT, "cpsat"), (SLOW_ILP, "ilp")):
        httpx.post(f"{service.url}/v1/solve", json={"problem": problem, "method": method, "time_limit_s": 60,
                                                    "wait_s": 0}, timeout=30)
    end = time.monotonic() + 60
    while len(service.session()) < 5 and time.monotonic() < end:  # service, forkserver, 2 solves, CBC
        time.sleep(0.05)
    before = len(service.session())
    service.proc.kill()
    t0 = time.monotonic()
    while service.session() and time.monotonic() - t0 < 30:
        time.sleep(0.02)
    gone, left = time.monotonic() - t0, len(service.session())
    service.stop()
    FIGURES.update(kill9_alive=left, kill9_gone_s=round(gone, 2))
    return [f"| kill -9 with a CP-SAT and an ILP (CBC) solve in flight | {before} processes; "
            f"**{left} alive** {gone:.2f} s after the SIGKILL |"]


def disk_full(tmp: Path) -> list[str]:
    if os.geteuid() != 0:
        return ["| disk full | not run: mounting a tmpfs needs root (tests/api/test_store_outages.py does the same) |"]
    disk = Path(tempfile.mkdtemp(prefix="pipesched-disk-"))
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)]).returncode != 0:
        return ["| disk full | not run: cannot mount a tmpfs here |"]
    service = Service.serve(f"sqlite:///{disk / 'cache.db'}", tmp / "disk.log")
    try:
        assert service.healthy(), "the service did not start"
        with contextlib.suppress(OSError), open(disk / "filler", "wb") as f:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        answers: Counter[str] = Counter()
        for m in range(64, 84):
            r = httpx.post(f"{service.url}/v1/solve", json={"problem": {"devices": 4, "microbatches": m},
                                                           "method": "gpipe"}, timeout=60)
            answers[f"{r.status_code}{' not stored' if 'x-pipesched-warning' in r.headers else ''}"] += 1
        health = httpx.get(f"{service.url}/healthz", timeout=10).status_code
        (disk / "filler").unlink()
        after = httpx.get(f"{service.url}/healthz", timeout=10).status_code
        FIGURES.update(disk_500s=service.statuses()[500], disk_not_stored=answers["200 not stored"])
        return [f"| disk full (SQLite on a 2 MB tmpfs, filled) | 20 new solves: {dict(answers)}; /healthz {health} "
                f"while full, {after} once space is freed; **500s {service.statuses()[500]}** |"]
    finally:
        service.stop()
        subprocess.run(["umount", "-l", str(disk)], check=False)
        shutil.rmtree(disk, ignore_errors=True)


def pg_restart(tmp: Path, outage_s: float) -> list[str]:
    pg = Postgres()
    pg.start()
    service = Service.serve(pg.url, tmp / "pg.log")
    try:
        assert service.healthy(), "the service did not start"
        known = {"problem": {"devices": 2, "microbatches": 3}, "method": "gpipe"}
        httpx.post(f"{service.url}/v1/solve", json=known, timeout=60)
        answers: Counter[int] = Counter()
        slowest_503, stop, lock = 0.0, threading.Event(), threading.Lock()

        def load(k: int) -> None:
            nonlocal slowest_503
            n = 0
            with httpx.Client(timeout=30) as http:
                while not stop.is_set():
                    n += 1
                    body = known if n % 2 else {"problem": {"devices": 2, "microbatches": 100 + 50 * k + n % 50},
                                                "method": "gpipe"}
                    path = "/healthz" if n % 5 == 0 else "/v1/solve"
                    t0 = time.monotonic()
                    try:
                        r = http.get(f"{service.url}{path}") if path == "/healthz" else \
                            http.post(f"{service.url}{path}", json=body)
                        code = r.status_code
                    except httpx.TransportError:
                        code = 0
                    with lock:
                        answers[code] += 1
                        if code == 503:
                            slowest_503 = max(slowest_503, time.monotonic() - t0)
                    time.sleep(0.05)

        threads = [threading.Thread(target=load, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        time.sleep(1.0)  # load before the outage (a benchmark's pacing, not synchronisation)
        pg.stop()
        time.sleep(outage_s)
        pg.start()
        resumed = service.healthy(60)
        stop.set()
        for t in threads:
            t.join(60)
        after = httpx.post(f"{service.url}/v1/solve", json={"problem": {"devices": 2, "microbatches": 97},
                                                            "method": "gpipe"}, timeout=60).status_code
        FIGURES.update(pg_500s=answers[500], pg_slowest_503_s=round(slowest_503, 2),
                       pg_resumed=int(resumed and after == 200))
        return [f"| PostgreSQL stopped {outage_s:g} s under load (8 clients: hits, misses, /healthz) | answers "
                f"{dict(sorted(answers.items()))}, **500s {answers[500]}**; slowest 503 {slowest_503:.2f} s; "
                f"resumed unattended: {'yes' if resumed and after == 200 else 'no'} |"]
    finally:
        service.stop()
        pg.close()


def replica_race(tmp: Path, races: int) -> list[str]:
    import psycopg

    up = 0
    for n in range(races):
        name = f"pipesched_race_{os.getpid()}_{n}"
        with psycopg.connect(ADMIN_PG, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        db = f"{ADMIN_PG.rsplit('/', 1)[0]}/{name}"
        procs = [Service.serve(db, tmp / f"race{n}a.log", external=True),
                 Service.serve(db, tmp / f"race{n}b.log", external=True),
                 Service(["worker", "--db", db], tmp / f"race{n}w.log")]
        try:
            ok = all(p.healthy(90) for p in procs[:2])
            end = time.monotonic() + 60
            while ok and "solving up to" not in procs[2].log.read_text() and time.monotonic() < end:
                ok = procs[2].proc.poll() is None
                time.sleep(0.1)
            up += ok and "solving up to" in procs[2].log.read_text()
        finally:
            for p in procs:
                p.stop()
            with psycopg.connect(ADMIN_PG, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    FIGURES.update(races_up=up, races=races)
    return [f"| replica race: two replicas and a worker at one instant on an empty database | "
            f"**{up} of {races} up** |"]


def slow_body(tmp: Path) -> list[str]:
    service = Service.serve(f"sqlite:///{tmp / 'slow.db'}", tmp / "slow.log")
    try:
        assert service.healthy(), "the service did not start"
        port = int(service.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=120) as s:
            s.sendall(b"POST /v1/solve HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                      b"content-length: 1000\r\n\r\n{\"problem\": {")
            t0, answer = time.monotonic(), b""
            while chunk := s.recv(65536):
                answer += chunk
            cut = time.monotonic() - t0
        status = answer.split(b" ", 2)[1].decode() if answer else "none"
        FIGURES.update(slow_body_cut_s=round(cut, 1))
        return [f"| slow body: 13 of 1000 bytes, then silence | **cut after {cut:.1f} s** (answer {status}, "
                f"body_timeout_s 20) |"]
    finally:
        service.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="128 trainers, 16 problems, 2 races, a 3 s outage")
    args = parser.parse_args(argv)
    trainers, problems, races, outage = (128, 16, 2, 3.0) if args.quick else (512, 64, 5, 10.0)
    with tempfile.TemporaryDirectory(prefix="pipesched-reliability-") as name:
        tmp = Path(name)
        rows = [*fleet(tmp, trainers, problems), *kill9(tmp), *disk_full(tmp), *pg_restart(tmp, outage),
                *replica_race(tmp, races), *slow_body(tmp)]
    text = "\n".join([
        "# Reliability: a trainer fleet, kill -9, a full disk, a PostgreSQL restart, a replica race, a slow body",
        "",
        f"Command: `nice -n 10 {command_line('reliability.py', argv)}`. Real servers on loopback; defaults "
        "unless a row says otherwise (2 solver processes, 32 queued, Client deadline_s 30 s).",
        "",
        "| scenario | result |",
        "|---|---|",
        *rows,
        "",
    ])
    publish(text, OUT, figures=FIGURES)


if __name__ == "__main__":
    main()

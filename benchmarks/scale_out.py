"""Scale-out mode (issue 15): worker throughput, cache hits under load, Ray batch overhead.

Three questions, each a ratio of two runs side by side on this machine:

1. solves/s with 1 vs 2 ``pipesched worker`` processes behind one ``serve --workers external``
   replica (distinct greedy problems, p = 8, m ~ 100: ~0.5 s of CPU each; target >= 1.7x);
2. p99 latency of cache hits on replica B while replica A's workers are saturated with CP-SAT
   solves, against B idle (target: within 20%);
3. ``pipesched batch --engine ray`` (a local Ray started by the command) against ``--jobs 2`` on
   the same sweep (benchmarks/batch_sweep.py's, method greedy; target: Ray <= 1.15x).

Needs PostgreSQL (``PIPESCHED_TEST_POSTGRES_URL``, default postgres@127.0.0.1:5432/test; a fresh
database is created and dropped) and the ``scaleout`` and ``ray`` extras.

    python benchmarks/scale_out.py [--solves 40] [--hits 400] [--sweep 200] [--skip-ray]

Writes results/scale_out.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "scaleout"))
from batch_sweep import sweep  # noqa: E402
from ray_parts import RayCluster  # noqa: E402
from report import command_line, publish  # noqa: E402
from scaleout_parts import Proc, Replica, start_worker  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
ADMIN = os.environ.get("PIPESCHED_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
HARD = {  # keeps CP-SAT busy for its whole time limit (tests/scaleout/test_scaleout.py)
    "devices": 4, "stages_per_device": 2, "placement": "loop", "objective": "stage_span",
    "costs": {"forward": [1.0, 1.3, 0.9, 1.1, 1.2, 0.8, 1.05, 1.15],
              "backward_input": [1.1, 1.0, 1.2, 0.9, 1.3, 1.0, 1.1, 0.95],
              "backward_weight": [0.7, 0.9, 0.8, 1.0, 0.6, 0.85, 0.75, 0.9], "comm": 0.1},
    "memory": {"forward": 1.0, "backward_input": 0.0, "backward_weight": -1.0, "limit": 5},
}


class Database:
    def __init__(self) -> None:
        self.name = f"pipesched_bench_{uuid.uuid4().hex[:8]}"
        self.url = f"{ADMIN.rsplit('/', 1)[0]}/{self.name}"

    def __enter__(self) -> str:
        with psycopg.connect(ADMIN, autocommit=True) as c:
            c.execute(f"CREATE DATABASE {self.name}")
        return self.url

    def __exit__(self, *exc: object) -> None:
        with psycopg.connect(ADMIN, autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")


def throughput(workers: int, solves: int, logs: Path) -> float:
    """Solves per second: every job queued first, then ``workers`` workers drain the queue."""
    with Database() as db:
        replica = Replica(db, logs / f"replica_{workers}.log")
        procs: list[Proc] = []
        try:
            ids = [replica.post({"problem": {"devices": 8, "microbatches": 96 + i}, "method": "greedy",
                                 "wait_s": 0}).json()["job"] for i in range(solves)]
            procs = [start_worker(db, logs / f"w{workers}_{k}.log") for k in range(workers)]
            with psycopg.connect(db, autocommit=True) as c:  # workers up: the first claim starts the clock
                while not c.execute("SELECT count(*) FROM jobs WHERE state <> 'queued'").fetchone()[0]:
                    time.sleep(0.01)
                t0 = time.perf_counter()
                while c.execute("SELECT count(*) FROM jobs WHERE state IN ('done', 'failed')").fetchone()[0] < solves:
                    time.sleep(0.02)
                elapsed = time.perf_counter() - t0
            assert all(replica.job(j)["state"] == "done" for j in ids)
            return solves / elapsed
        finally:
            for p in [replica, *procs]:
                p.stop()


def hit_latencies(replica: Replica, body: dict, n: int) -> list[float]:
    out = []
    with httpx.Client(timeout=60) as client:
        for _ in range(n):
            t0 = time.perf_counter()
            r = client.post(f"{replica.url}/v1/solve", json=body)
            out.append(time.perf_counter() - t0)
            assert r.status_code == 200 and r.json()["cached"], r.text
    return out


def p99(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=100)[98]


def hits_under_load(hits: int, logs: Path) -> tuple[list[float], list[float]]:
    with Database() as db:
        a, b = Replica(db, logs / "a.log"), Replica(db, logs / "b.log")
        workers = [start_worker(db, logs / f"wl{k}.log") for k in range(2)]
        try:
            body = {"problem": {"devices": 4, "microbatches": 8}, "method": "1f1b"}
            assert b.post(body).status_code == 200
            idle = hit_latencies(b, body, hits)
            for m in range(8, 8 + 8):  # more CP-SAT solves than workers: A's queue stays full
                a.post({"problem": {**HARD, "microbatches": m}, "method": "cpsat", "time_limit_s": 10, "wait_s": 0})
            time.sleep(2)
            loaded = hit_latencies(b, body, hits)
            return idle, loaded
        finally:
            for p in [a, b, *workers]:
                p.stop()


def batch_time(args: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pipesched", "batch", *args], capture_output=True, text=True,
                          env=env or {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return time.perf_counter() - t0


def ray_vs_local(count: int, tmp: Path) -> tuple[float, float, float]:
    """``--jobs 2``; Ray on a running cluster (two 1-CPU nodes on this machine, as the tests start
    it); Ray started by the command itself (``--engine ray`` without ``--address``)."""
    src = tmp / "sweep.jsonl"
    src.write_text("".join(json.dumps(p) + "\n" for p in sweep(count)))
    common = [str(src), "--method", "greedy", "--time-limit", "5"]
    local = batch_time([*common, "-o", str(tmp / "local"), "--jobs", "2"])
    cluster = RayCluster(tmp).start()
    try:
        running = batch_time([*common, "-o", str(tmp / "ray"), "--engine", "ray", "--address", cluster.address],
                             cluster.env)
    finally:
        cluster.stop()
    cold = batch_time([*common, "-o", str(tmp / "ray_cold"), "--engine", "ray"])
    return local, running, cold


def main(argv: list[str] | None = None) -> None:
    load_before = os.getloadavg()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--solves", type=int, default=40)
    ap.add_argument("--hits", type=int, default=400)
    ap.add_argument("--sweep", type=int, default=200)
    ap.add_argument("--skip-ray", action="store_true")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        one, two = throughput(1, args.solves, tmp), throughput(2, args.solves, tmp)
        rows.append(("solves/s, 2 workers vs 1", f"{two:.2f} vs {one:.2f}", f"**{two / one:.2f}x**", ">= 1.7x"))
        idle, loaded = hits_under_load(args.hits, tmp)
        rows.append(("cache-hit p99 on B, A's workers saturated vs idle (ms)",
                     f"{p99(loaded) * 1e3:.2f} vs {p99(idle) * 1e3:.2f}", f"**{p99(loaded) / p99(idle):.2f}x**",
                     "<= 1.20x"))
        rows.append(("cache-hit median on B, saturated vs idle (ms)",
                     f"{statistics.median(loaded) * 1e3:.2f} vs {statistics.median(idle) * 1e3:.2f}",
                     f"{statistics.median(loaded) / statistics.median(idle):.2f}x", ""))
        if not args.skip_ray:
            local, running, cold = ray_vs_local(args.sweep, tmp)
            rows.append((f"batch of {args.sweep} (greedy): --engine ray on a running cluster vs --jobs 2 (s)",
                         f"{running:.1f} vs {local:.1f}", f"**{running / local:.2f}x**", "<= 1.15x"))
            rows.append((f"batch of {args.sweep}: --engine ray starting its own local Ray vs --jobs 2 (s)",
                         f"{cold:.1f} vs {local:.1f}", f"{cold / local:.2f}x", ""))
    lines = [
        "# Scale-out mode: workers, cache hits under load, Ray batch",
        "",
        f"Command: `{command_line('scale_out.py', argv)}`",
        "",
        "| question | measured | ratio | target |",
        "|---|---|---|---|",
        *(f"| {q} | {m} | {r} | {t} |" for q, m, r, t in rows),
        "",
        "Every run on this 2-core machine shares it with the other jobs of the moment (load in the",
        "provenance below); two workers can reach 2x only when both cores are free.",
    ]
    publish("\n".join(lines), RESULTS / "scale_out.md", load_before)


if __name__ == "__main__":
    main()

"""Scale-out mode (issue 15): worker throughput, cache hits under load, wake-ups, Ray batch overhead.

Each question is answered by runs side by side on this machine:

1. solves/s with 1 vs 2 ``pipesched worker`` processes behind one ``serve --workers external``
   replica (distinct greedy problems, p = 8, m ~ 100: ~0.5 s of CPU each; target >= 1.7x); the
   workers run at ``--nice 0`` here so that the other jobs on a shared machine do not decide the
   ratio (on an otherwise idle host the nice value changes nothing);
2. p99 latency of cache hits on replica B while replica A's two workers saturate both cores with
   CP-SAT solves, against the same with the workers paused (SIGSTOP), the two interleaved in 20
   rounds so both see the same background load (target: within 20%); with the solves at
   ``--nice idle`` (the default: an idle CPU cgroup where cgroups are writable, else SCHED_IDLE; the
   table names the CPU cgroups of the workers' child processes), ``--nice 10`` and ``--nice 0`` (no lowering);
3. wake-ups: POST -> answer of a tiny miss (1f1b, p = 2; ``--nice 0``) sent to an idle worker, and
   its phases: enqueue, claim (pgqueuer's log: ``queued``, ``picked``), solve and store (the job
   table's ``finished_at``), the replica's answer;
4. ``pipesched batch --engine ray`` against ``--jobs 2`` on the same sweep (benchmarks/batch_sweep.py's,
   method greedy): on a running two-node (1 CPU each) cluster, cluster start excluded, runs
   alternating ``local, ray, local, ray, local`` and the medians compared (target: Ray <= 1.15x),
   and with the command starting its own local Ray, start included.

Needs PostgreSQL (``PIPESCHED_TEST_POSTGRES_URL``, default postgres@127.0.0.1:5432/test; a fresh
database is created and dropped) and the ``scaleout`` and ``ray`` extras.

    python benchmarks/scale_out.py [--quick] [--solves 20] [--hits 1000] [--wakeups 30] [--sweep 200] [--skip-ray]
                                   [--only throughput,hits,wakeups,ray]

``--quick`` (12 solves, 300 hits, 10 wake-ups, a 50-problem sweep, no cold Ray) takes about a
minute and a half and writes results/scale_out_quick.md; the full run (under five minutes, also
under load) writes results/scale_out.md. ``--only`` runs the named parts and writes
results/scale_out_<parts>.md (``--only ray``: the Ray sweep alone, about a minute).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "scaleout"))
from batch_sweep import sweep  # noqa: E402
from ray_parts import RayCluster  # noqa: E402
from report import command_line, publish  # noqa: E402
from scaleout_parts import Proc, Replica, descendants, start_worker  # noqa: E402

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
    """Solves per second once every worker runs: all jobs queued first, then ``workers`` workers drain
    the queue; the rate is taken between the ``2 * workers``-th and the last completion (the job
    table's ``finished_at``), so a worker's start-up (process, solver imports) does not count."""
    with Database() as db:
        replica = Replica(db, logs / f"replica_{workers}.log")
        procs: list[Proc] = []
        try:
            ids = [replica.post({"problem": {"devices": 8, "microbatches": 96 + i}, "method": "greedy",
                                 "wait_s": 0}).json()["job"] for i in range(solves)]
            procs = [start_worker(db, logs / f"w{workers}_{k}.log", "--nice", "0") for k in range(workers)]
            with psycopg.connect(db, autocommit=True) as c:
                while c.execute("SELECT count(*) FROM jobs WHERE state IN ('done', 'failed')").fetchone()[0] < solves:
                    time.sleep(0.05)
                done = [t for (t,) in c.execute("SELECT finished_at FROM jobs ORDER BY finished_at").fetchall()]
            assert all(replica.job(j)["state"] == "done" for j in ids)
            warm = 2 * workers
            return (len(done) - 1 - warm) / (done[-1] - done[warm])
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


def solve_placement(workers: list[Proc]) -> str:
    """Where the workers' solve processes run: their CPU cgroups (``/proc/PID/cgroup``), so a reading
    says whether ``--nice idle`` found a writable cgroup (api/scaleout/idle_cgroup.py) or fell back."""
    groups = set()
    for w in workers:
        for pid in descendants(w.proc.pid):
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
                    _, controllers, path = line.split(":", 2)
                    if "cpu" in controllers.split(","):
                        groups.add(path)
    return ", ".join(sorted(groups)) or "?"


def hits_under_load(hits: int, nice: str, logs: Path, rounds: int = 20) -> tuple[list[float], list[float], str]:
    """Cache hits on B: (workers paused, workers solving), interleaved in ``rounds`` so that both
    samples see the same background load. A's two workers run CP-SAT (solves at ``--nice``) for the
    whole reading; between chunks their process groups are paused (SIGSTOP) and resumed."""
    with Database() as db:
        a, b = Replica(db, logs / f"a{nice}.log"), Replica(db, logs / f"b{nice}.log")
        workers = [start_worker(db, logs / f"wl{nice}_{k}.log", "--nice", nice, "--heartbeat-timeout", "30")
                   for k in range(2)]
        try:
            body = {"problem": {"devices": 4, "microbatches": 8}, "method": "1f1b"}
            assert b.post(body).status_code == 200
            hit_latencies(b, body, 50)  # warm: connections, memo
            for m in range(8, 12):  # two solves per worker, each CP-SAT's whole time limit
                a.post({"problem": {**HARD, "microbatches": m}, "method": "cpsat", "time_limit_s": 60, "wait_s": 0})
            with psycopg.connect(db, autocommit=True) as c:  # both workers solving: the cores are taken
                while c.execute("SELECT count(*) FROM jobs WHERE state = 'running'").fetchone()[0] < 2:
                    time.sleep(0.05)
            time.sleep(1.0)  # past the solves' start-up
            placement = solve_placement(workers)
            idle: list[float] = []
            loaded: list[float] = []
            chunk = max(1, hits // rounds)
            for _ in range(rounds):
                signal_workers(workers, signal.SIGSTOP)
                time.sleep(0.05)
                idle += hit_latencies(b, body, chunk)
                signal_workers(workers, signal.SIGCONT)
                time.sleep(0.05)
                loaded += hit_latencies(b, body, chunk)
            return idle, loaded, placement
        finally:
            signal_workers(workers, signal.SIGCONT)
            for proc in [a, b, *workers]:
                proc.stop()


def signal_workers(workers: list[Proc], sig: signal.Signals) -> None:
    """The workers and every process below them (a solve may run in a session of its own: lowprio)."""
    for w in workers:
        for pid in [w.proc.pid, *descendants(w.proc.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)


#: The phases of a miss, in order (each the median over the tiny misses).
PHASES = ("POST -> queued", "queued -> claimed", "claimed -> finished (solve, store)", "finished -> answer")


def wakeups(n: int, logs: Path) -> tuple[list[float], list[list[float]]]:
    """POST -> answer of ``n`` tiny misses sent one at a time to an idle worker, and each one's
    :data:`PHASES` (seconds; queued and claimed from pgqueuer's log, finished from the job table,
    all clocks of this host)."""
    with Database() as db:
        replica = Replica(db, logs / "wake.log")
        worker = start_worker(db, logs / "wake_w.log", "--nice", "0")
        try:
            sent: dict[str, tuple[float, float]] = {}
            for i in range(n + 1):
                time.sleep(0.3)  # the worker is idle again, waiting for a notification
                t0 = time.time()
                r = replica.post({"problem": {"devices": 2, "microbatches": 40 + i}, "method": "1f1b",
                                  "wait_s": 30})
                assert r.status_code == 200 and not r.json()["cached"], r.text
                sent[r.json()["key"]] = (t0, time.time())
            with psycopg.connect(db, autocommit=True) as c:
                rows = c.execute(
                    "SELECT j.key, extract(epoch FROM min(l.created) FILTER (WHERE l.status = 'queued')), "
                    "extract(epoch FROM min(l.created) FILTER (WHERE l.status = 'picked')), j.finished_at "
                    "FROM jobs j JOIN pgqueuer_log l ON l.job_id::text = j.id GROUP BY j.key, j.finished_at "
                    "ORDER BY min(l.created)").fetchall()
            phases: list[list[float]] = [[] for _ in PHASES]
            for key, queued, claimed, finished in rows[1:]:  # the first: the worker starting up
                posted, answered = sent[key]
                for k, d in enumerate((float(queued) - posted, float(claimed) - float(queued),
                                       finished - float(claimed), answered - finished)):
                    phases[k].append(d)
            total = [sent[key][1] - sent[key][0] for key, *_ in rows[1:]]
            return total, phases
        finally:
            replica.stop()
            worker.stop()


def batch_time(args: list[str], env: dict[str, str] | None = None) -> float:
    """Wall seconds of one ``pipesched batch`` (process start to exit)."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pipesched", "batch", *args], capture_output=True, text=True,
                          env=env or {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return time.perf_counter() - t0


@dataclass
class RayReading:
    """Wall seconds per run, in the order they ran (local and Ray alternate, so a drift of the load shows)."""

    local: list[float] = field(default_factory=list)  # --jobs 2
    ray: list[float] = field(default_factory=list)  # --engine ray on a running cluster
    cold: float | None = None  # --engine ray starting its own local Ray


def ray_vs_local(count: int, tmp: Path, rounds: int, cold: bool = True) -> RayReading:
    """``--jobs 2`` and Ray on a running cluster (two 1-CPU nodes on this machine, as the tests start
    it; its start excluded), alternating ``local, ray, local, ..., local``; then, unless ``cold`` is
    off, Ray started by the command itself (``--engine ray`` without ``--address``; start included)."""
    src = tmp / "sweep.jsonl"
    src.write_text("".join(json.dumps(p) + "\n" for p in sweep(count)))
    common = [str(src), "--method", "greedy", "--time-limit", "5"]
    reading = RayReading()
    cluster = RayCluster(tmp).start()
    try:
        for k in range(rounds + 1):
            reading.local.append(batch_time([*common, "-o", str(tmp / f"local{k}"), "--jobs", "2"]))
            if k < rounds:
                reading.ray.append(batch_time([*common, "-o", str(tmp / f"ray{k}"), "--engine", "ray",
                                               "--address", cluster.address], cluster.env))
    finally:
        cluster.stop()
    if cold:
        reading.cold = batch_time([*common, "-o", str(tmp / "ray_cold"), "--engine", "ray"])
    return reading


#: The questions, in the order they run (``--only``).
PARTS = ("throughput", "hits", "wakeups", "ray")


def ms(x: float) -> str:
    return f"{x * 1e3:.1f}"


def main(argv: list[str] | None = None) -> None:
    load_before = os.getloadavg()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small counts, no cold Ray (about 1.5 min)")
    ap.add_argument("--solves", type=int, default=None, help="solves per throughput run (24; quick 12)")
    ap.add_argument("--hits", type=int, default=None, help="cache hits per reading (1000; quick 300)")
    ap.add_argument("--wakeups", type=int, default=None, help="tiny misses timed (30; quick 10)")
    ap.add_argument("--sweep", type=int, default=None, help="problems in the Ray sweep (200; quick 50)")
    ap.add_argument("--skip-ray", action="store_true")
    ap.add_argument("--only", default=",".join(PARTS),
                    help=f"comma-separated parts to run, of {', '.join(PARTS)} (all)")
    args = ap.parse_args(argv)
    parts = [x.strip() for x in args.only.split(",") if x.strip()]
    if not parts or set(parts) - set(PARTS):
        ap.error(f"--only {args.only}: choose parts among {', '.join(PARTS)}")
    if args.skip_ray and "ray" in parts:
        parts.remove("ray")
    quick = args.quick
    solves = args.solves or (12 if quick else 24)
    hits = args.hits or (300 if quick else 1000)
    n_wake = args.wakeups or (10 if quick else 30)
    count = args.sweep or (50 if quick else 200)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if "throughput" in parts:
            one, two = throughput(1, solves, tmp), throughput(2, solves, tmp)
            rows.append(("solves/s, 2 workers vs 1", f"{two:.2f} vs {one:.2f}", f"**{two / one:.2f}x**", ">= 1.7x"))
        for nice, target in (("idle", "<= 1.20x"), ("10", ""), ("0", "")) if "hits" in parts else ():
            idle, loaded, placement = hits_under_load(hits, nice, tmp)
            label = f"--nice {nice}" + (" (default)" if nice == "idle" else "") + f"; the workers' child processes in CPU cgroups {placement}"
            rows.append((f"cache-hit p99 on B, A's workers saturated ({label}) vs idle (ms)",
                         f"{ms(p99(loaded))} vs {ms(p99(idle))}", f"**{p99(loaded) / p99(idle):.2f}x**", target))
            rows.append((f"cache-hit median on B, the same ({label}) (ms)",
                         f"{ms(statistics.median(loaded))} vs {ms(statistics.median(idle))}",
                         f"{statistics.median(loaded) / statistics.median(idle):.2f}x", ""))
        if "wakeups" in parts:
            total, phases = wakeups(n_wake, tmp)
            rows.append((f"POST -> answer of a tiny miss (1f1b, p = 2), median / max of {len(total)} (ms)",
                         f"{ms(statistics.median(total))} / {ms(max(total))}", "", ""))
            for name, xs in zip(PHASES, phases, strict=True):
                rows.append((f"- of which {name}, median / max (ms)", f"{ms(statistics.median(xs))} / {ms(max(xs))}",
                             "", "prompt (was a 200 ms poll)" if name == "queued -> claimed" else ""))
        if "ray" in parts:
            got = ray_vs_local(count, tmp, rounds=1 if quick else 2, cold=not quick)
            local, ray = statistics.median(got.local), statistics.median(got.ray)
            runs = f"Ray runs {', '.join(f'{w:.1f}' for w in got.ray)}; local runs {', '.join(f'{w:.1f}' for w in got.local)}"
            rows.append((f"batch of {count} (greedy): --engine ray on a running cluster vs --jobs 2, median (s)",
                         f"{ray:.1f} vs {local:.1f} ({runs})", f"**{ray / local:.2f}x**", "<= 1.15x"))
            if got.cold is not None:
                rows.append((f"batch of {count}: --engine ray starting its own local Ray vs --jobs 2 (s)",
                             f"{got.cold:.1f} vs {local:.1f}", f"{got.cold / local:.2f}x", ""))
    lines = [
        "# Scale-out mode: workers, cache hits under load, wake-ups, Ray batch",
        "",
        f"Command: `{command_line('scale_out.py', argv)}`",
        "",
        "| question | measured | ratio | target |",
        "|---|---|---|---|",
        *(f"| {q} | {m} | {r} | {t} |" for q, m, r, t in rows),
        "",
        "Every run on this 2-core machine shares it with the other jobs of the moment (load in the",
        "header above): two workers reach 2x only when both cores are free, and the cache-hit",
        "ratios compare readings taken seconds apart, so a change in the background load moves them.",
    ]
    # A quick or partial reading never overwrites the full one that docs/scale-out.md quotes.
    name = "scale_out" + ("_quick" if quick else "") + ("" if parts == list(PARTS) else "_" + "_".join(parts))
    publish("\n".join(lines), RESULTS / f"{name}.md", load_before)


if __name__ == "__main__":
    main()

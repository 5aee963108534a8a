"""Cache-hit throughput and latency of POST /v1/solve, beside FastAPI's own ceiling.

Starts two uvicorn servers on loopback with the same settings: ``pipesched serve`` (SQLite
cache, one entry solved beforehand) and a bare FastAPI app whose POST /v1/solve ignores the
body and returns a constant of the same size as our answer. A closed-loop load generator
(raw asyncio sockets, HTTP/1.1 keep-alive, ``--connections`` in flight) drives them in
alternating rounds, so all see the same machine load. Two kinds of cache hit: a client
re-sending the same bytes (a restarted trainer: the parsed request is memoised by its bytes) and
requests whose bytes all differ (``wait_s``), parsed, validated and keyed every time. Reports req/s and p50/p99 latency (medians over rounds)
and the share of the ceiling (target >= 70%).

    python benchmarks/service_throughput.py [--rounds 10] [--seconds 2] [--connections 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

RESULTS = Path(__file__).resolve().parent / "results" / "service_throughput.md"
BARE = "bare FastAPI (constant)"
SAME = "pipesched cache hit, same bytes each time"
NEW = "pipesched cache hit, new bytes each time (parse, validate, key)"
PROBLEM = {"devices": 4, "microbatches": 8, "costs": {"forward": [1.0, 1.1, 1.2, 1.3]}}


def bare_app(size: int):  # noqa: ANN201
    """FastAPI's ceiling: same route, constant body of ``size`` bytes, no parsing, no cache."""
    from fastapi import FastAPI, Response

    app = FastAPI()
    body = b'{"pad":"' + b"x" * (size - 10) + b'"}'

    @app.post("/v1/solve")
    async def constant() -> Response:
        return Response(body, media_type="application/json")

    return app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, path: str, proc: subprocess.Popen) -> None:
    for _ in range(600):
        if proc.poll() is not None:
            raise RuntimeError(f"server {url} exited with {proc.returncode}")
        try:
            httpx.get(url + path, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not start")


def _request(body: bytes) -> bytes:
    return (b"POST /v1/solve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


async def _one_connection(port: int, body: bytes, vary: int | None, stop_at: float, latencies: list[float]) -> None:
    """Closed loop on one keep-alive connection. With ``vary``, every request's bytes differ (a
    different ``wait_s``, which a cache hit ignores, cycling through more variants than the server
    memoises)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    fixed = _request(body)
    i = vary or 0
    try:
        while time.perf_counter() < stop_at:
            if vary is not None:
                i = (i + 1) % 100_000
                request = _request(b'{"wait_s":' + str(30 + i / 1000).encode() + b"," + body[1:])
            else:
                request = fixed
            t0 = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            await reader.readexactly(length)
            if status != 200:
                raise RuntimeError(f"HTTP {status} during the benchmark")
            latencies.append(time.perf_counter() - t0)
    finally:
        writer.close()


def run_round(port: int, body: bytes, seconds: float, connections: int,
              vary: bool = False) -> tuple[float, list[float]]:
    latencies: list[float] = []

    async def main() -> None:
        stop_at = time.perf_counter() + seconds
        await asyncio.gather(*(_one_connection(port, body, c * 6007 if vary else None, stop_at, latencies)
                               for c in range(connections)))

    t0 = time.perf_counter()
    asyncio.run(main())
    return len(latencies) / (time.perf_counter() - t0), latencies


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--bare-server", nargs=2, type=int, metavar=("PORT", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_server:
        import uvicorn

        port, size = args.bare_server
        uvicorn.run(bare_app(size), host="127.0.0.1", port=port, log_level="warning", access_log=False)
        return 0

    load_before = os.getloadavg()
    tmp = tempfile.mkdtemp(prefix="pipesched-bench-")
    ours_port, bare_port = free_port(), free_port()
    procs: list[subprocess.Popen] = []
    try:
        ours = subprocess.Popen([sys.executable, "-m", "pipesched", "serve", "--port", str(ours_port),
                                 "--db", f"sqlite:///{tmp}/cache.db"], stdout=subprocess.DEVNULL)
        procs.append(ours)
        wait_healthy(f"http://127.0.0.1:{ours_port}", "/healthz", ours)
        body = json.dumps({"problem": PROBLEM, "method": "gpipe"}).encode()
        first = httpx.post(f"http://127.0.0.1:{ours_port}/v1/solve", content=body,
                           headers={"content-type": "application/json"}, timeout=60)
        first.raise_for_status()
        size = len(httpx.post(f"http://127.0.0.1:{ours_port}/v1/solve", content=body,
                              headers={"content-type": "application/json"}).content)
        bare = subprocess.Popen([sys.executable, __file__, "--bare-server", str(bare_port), str(size)],
                                stdout=subprocess.DEVNULL)
        procs.append(bare)
        wait_healthy(f"http://127.0.0.1:{bare_port}", "/docs", bare)
        run_round(ours_port, body, 1.0, args.connections)  # warm both
        run_round(bare_port, body, 1.0, args.connections)
        results: dict[str, list[tuple[float, list[float]]]] = {BARE: [], SAME: [], NEW: []}
        for _ in range(args.rounds):
            results[BARE].append(run_round(bare_port, body, args.seconds, args.connections))
            results[SAME].append(run_round(ours_port, body, args.seconds, args.connections))
            results[NEW].append(run_round(ours_port, body, args.seconds, args.connections, vary=True))
    finally:
        for p in procs:
            p.terminate()
            p.wait(10)
    load_after = os.getloadavg()

    rows = []
    for name, runs in results.items():
        rate = statistics.median(r for r, _ in runs)
        p50 = statistics.median(percentile(lat, 0.50) for _, lat in runs) * 1e3
        p99 = statistics.median(percentile(lat, 0.99) for _, lat in runs) * 1e3
        rows.append((name, rate, p50, p99))
    ceiling = rows[0][1]
    # Each round of ours ran right after a round of the bare app: their ratio cancels most of the
    # load the other tenants of the machine put on it; report the median of those paired ratios.
    paired = {name: statistics.median(o[0] / b[0] for b, o in zip(results[BARE], results[name], strict=True))
              for name in results}
    command = "python benchmarks/service_throughput.py " + " ".join(
        f"--{k} {v}" for k, v in (("rounds", args.rounds), ("seconds", args.seconds), ("connections", args.connections)))
    lines = [
        "# Service throughput: cache hits vs the bare FastAPI ceiling",
        "",
        f"Command: `{command}`  ",
        f"Response size {size} bytes; {args.connections} keep-alive connections on loopback; "
        f"{args.rounds} alternating rounds of {args.seconds:g} s; medians over rounds.  ",
        f"Machine: {os.cpu_count()} cores shared with other work; load average "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after.",
        "",
        f"**Cache hits reach {paired[SAME]:.0%} of the bare FastAPI ceiling when a client re-sends the same "
        f"bytes, {paired[NEW]:.0%} when every request's bytes are new** (median of per-round ratios; target >= 70%).",
        "",
        "| server | req/s | p50 ms | p99 ms | vs ceiling, per-round ratio | vs ceiling, ratio of medians |",
        "|---|---|---|---|---|---|",
    ]
    for name, rate, p50, p99 in rows:
        lines.append(f"| {name} | {rate:.0f} | {p50:.2f} | {p99:.2f} | {paired[name]:.0%} | {rate / ceiling:.0%} |")
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

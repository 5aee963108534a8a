"""Cache-hit throughput and latency of POST /v1/solve, against a raw ASGI ceiling and a FastAPI route.

Starts three uvicorn servers on loopback with the same settings: ``pipesched serve`` (SQLite
cache, one entry solved beforehand); the **ceiling**, a raw ASGI app that reads the request body
and returns the very bytes and headers of our cache hit (what our fast path does, minus the cache
lookup: no server on this stack can answer faster); and a plain FastAPI route returning the same
bytes (the framework's per-request cost, a second reference). A closed-loop load generator (raw
asyncio sockets, HTTP/1.1 keep-alive, ``--connections`` in flight) drives them in alternating
rounds, so all see the same machine load. Two kinds of cache hit: a client re-sending the same
bytes (a restarted trainer: the parsed request is memoised by its bytes), and requests whose bytes
never repeat within the run (a different ``wait_s``, which a hit ignores, from one counter shared
by all connections and rounds, so the server's memo of parsed bodies never serves one): parsed,
validated and keyed every time. Reports req/s, p50/p99 latency (medians over rounds) and, for
each, the median of per-round ratios to the ceiling and to the FastAPI route (target >= 70% of
the ceiling for new bytes).

    python benchmarks/service_throughput.py [--rounds 10] [--seconds 2] [--connections 16]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from fastapi import FastAPI, Request, Response

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import command_line, publish  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "service_throughput.md"
CEILING = "ceiling: raw ASGI app, same bytes as a cache hit"
ROUTE = "FastAPI route returning the same bytes"
SAME = "pipesched cache hit, same bytes each time"
NEW = "pipesched cache hit, new bytes each time (parse, validate, key)"
PROBLEM = {"devices": 4, "microbatches": 8, "costs": {"forward": [1.0, 1.1, 1.2, 1.3]}}
HEADERS = [(b"content-type", b"application/json")]


def ceiling_app(answer: bytes):  # noqa: ANN201
    """The ceiling: a bare ASGI callable that drains the body and sends ``answer`` with the headers
    our cache-hit fast path sends (``api/http/middleware.py``)."""
    headers = [*HEADERS, (b"content-length", str(len(answer)).encode())]

    async def app(scope: dict, receive, send) -> None:  # noqa: ANN001
        if scope["type"] != "http":
            return
        more = True
        while more:
            message = await receive()
            more = message.get("more_body", False)
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    return app


def route_app(answer: bytes) -> FastAPI:
    """The framework's reference: a FastAPI route that reads the body and returns ``answer``."""
    app = FastAPI()

    @app.post("/v1/solve")
    async def constant(request: Request) -> Response:
        await request.body()
        return Response(answer, media_type="application/json")

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


def varied_body(body: bytes, i: int) -> bytes:
    """``body`` with ``"wait_s": 30.<i as 9 digits>`` in front: distinct bytes for every ``i`` below
    1e9, the same cache entry (a hit ignores ``wait_s``), within ``max_wait_s``."""
    return b'{"wait_s":30.' + f"{i:09d}".encode() + b"," + body[1:]


async def _one_connection(port: int, body: bytes, counter: Iterator[int] | None, stop_at: float,
                          latencies: list[float]) -> None:
    """Closed loop on one keep-alive connection. With ``counter`` every request takes the next
    number from it, so no two requests of the run carry the same bytes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    fixed = _request(body)
    try:
        while time.perf_counter() < stop_at:
            request = fixed if counter is None else _request(varied_body(body, next(counter)))
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
              counter: Iterator[int] | None = None) -> tuple[float, list[float]]:
    """``connections`` closed loops for ``seconds``: (requests per second, latencies)."""
    latencies: list[float] = []

    async def main() -> None:
        stop_at = time.perf_counter() + seconds
        await asyncio.gather(*(_one_connection(port, body, counter, stop_at, latencies) for _ in range(connections)))

    t0 = time.perf_counter()
    asyncio.run(main())
    return len(latencies) / (time.perf_counter() - t0), latencies


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def serve_reference(kind: str, port: int, answer_file: str) -> None:
    import uvicorn

    answer = Path(answer_file).read_bytes()
    app = ceiling_app(answer) if kind == "ceiling" else route_app(answer)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def post(port: int, body: bytes) -> bytes:
    response = httpx.post(f"http://127.0.0.1:{port}/v1/solve", content=body,
                          headers={"content-type": "application/json"}, timeout=60)
    response.raise_for_status()
    return response.content


def measure(args: argparse.Namespace, tmp: str) -> tuple[dict[str, list[tuple[float, list[float]]]], int, int]:
    """Start the three servers, check they answer the same bytes, run the alternating rounds.
    Returns the rounds per server, the answer size and how many distinct new-bytes bodies were sent."""
    ports = {name: free_port() for name in (SAME, CEILING, ROUTE)}
    procs: list[subprocess.Popen] = []
    try:
        ours = subprocess.Popen([sys.executable, "-m", "pipesched", "serve", "--port", str(ports[SAME]),
                                 "--db", f"sqlite:///{tmp}/cache.db"], stdout=subprocess.DEVNULL)
        procs.append(ours)
        wait_healthy(f"http://127.0.0.1:{ports[SAME]}", "/healthz", ours)
        body = json.dumps({"problem": PROBLEM, "method": "gpipe"}).encode()
        post(ports[SAME], body)  # solves and caches
        answer = post(ports[SAME], body)  # the cache hit's bytes
        if post(ports[SAME], varied_body(body, 999_999_999)) != answer:
            raise RuntimeError("a different wait_s changed the cache hit's bytes")
        answer_file = Path(tmp) / "answer.json"
        answer_file.write_bytes(answer)
        for name, kind in ((CEILING, "ceiling"), (ROUTE, "route")):
            proc = subprocess.Popen([sys.executable, __file__, "--reference-server", kind, str(ports[name]),
                                     str(answer_file)], stdout=subprocess.DEVNULL)
            procs.append(proc)
            wait_healthy(f"http://127.0.0.1:{ports[name]}", "/docs", proc)
            if post(ports[name], body) != answer:
                raise RuntimeError(f"{name} does not return the cache hit's bytes")
        counter = itertools.count()
        for name in (CEILING, ROUTE, SAME):  # warm up
            run_round(ports[name], body, 1.0, args.connections)
        run_round(ports[SAME], body, 1.0, args.connections, counter)
        results: dict[str, list[tuple[float, list[float]]]] = {CEILING: [], ROUTE: [], SAME: [], NEW: []}
        for _ in range(args.rounds):
            for name in (CEILING, ROUTE, SAME):
                results[name].append(run_round(ports[name], body, args.seconds, args.connections))
            results[NEW].append(run_round(ports[SAME], body, args.seconds, args.connections, counter))
    finally:
        for p in procs:
            p.terminate()
            p.wait(10)
    return results, len(answer), next(counter)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--reference-server", nargs=3, metavar=("KIND", "PORT", "ANSWER_FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.reference_server:
        kind, port, answer_file = args.reference_server
        serve_reference(kind, int(port), answer_file)
        return 0

    with tempfile.TemporaryDirectory(prefix="pipesched-bench-") as tmp:
        results, size, distinct = measure(args, tmp)

    rows = []
    for name, runs in results.items():
        rate = statistics.median(r for r, _ in runs)
        p50 = statistics.median(percentile(lat, 0.50) for _, lat in runs) * 1e3
        p99 = statistics.median(percentile(lat, 0.99) for _, lat in runs) * 1e3
        rows.append((name, rate, p50, p99))
    # Each server's round ran right after the others' in the same cycle: per-round ratios cancel
    # most of the load the other tenants of the machine put on it; report their medians.

    def paired(name: str, reference: str) -> float:
        return statistics.median(o[0] / b[0] for b, o in zip(results[reference], results[name], strict=True))

    lines = [
        "# Service throughput: cache hits vs a raw ASGI ceiling and a FastAPI route",
        "",
        f"Command: `{command_line('service_throughput.py', argv)}`  ",
        f"Response size {size} bytes, identical from all three servers; {args.connections} keep-alive connections "
        f"on loopback; {args.rounds} alternating rounds of {args.seconds:g} s; medians over rounds. The new-bytes "
        f"rows sent {distinct} distinct bodies (one counter for the whole run: none repeated).",
        "",
        f"**Cache hits reach {paired(SAME, CEILING):.0%} of the raw ASGI ceiling when a client re-sends the same "
        f"bytes, {paired(NEW, CEILING):.0%} when every request's bytes are new** (median of per-round ratios; "
        f"target >= 70%); against the FastAPI route: {paired(SAME, ROUTE):.0%} and {paired(NEW, ROUTE):.0%}.",
        "",
        "| server | req/s | p50 ms | p99 ms | vs ceiling, per-round ratio | vs FastAPI route, per-round ratio |",
        "|---|---|---|---|---|---|",
    ]
    for name, rate, p50, p99 in rows:
        lines.append(f"| {name} | {rate:.0f} | {p50:.2f} | {p99:.2f} | {paired(name, CEILING):.0%} | "
                     f"{paired(name, ROUTE):.0%} |")
    publish("\n".join(lines) + "\n", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Fifty identical requests in flight cost one solve and get one answer."""

from __future__ import annotations

import asyncio

import httpx
from api_servers import Server

from pipesched.api.store import Store
from pipesched.solver.core.canonical import problem_key

PROBLEM = {"devices": 16, "microbatches": 256}  # ~12k ops: a solve long enough for all 50 to arrive


def test_50_concurrent_identical_requests_share_one_solve(server: Server) -> None:
    before = {s: server.metric(s) for s in ('pipesched_solves_total{outcome="ok"}', "pipesched_shared_solves_total",
                                            "pipesched_cache_hits_total")}

    async def burst() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=60)
        async with httpx.AsyncClient(base_url=server.url, timeout=120, limits=limits) as client:
            body = {"problem": PROBLEM, "method": "gpipe", "wait_s": 100}
            return await asyncio.gather(*(client.post("/v1/solve", json=body) for _ in range(50)))

    responses = asyncio.run(burst())
    assert [r.status_code for r in responses] == [200] * 50
    bodies = [r.json() for r in responses]
    assert len({r.json()["key"] for r in responses}) == 1
    schedules = {r.text[r.text.index('"schedule":'):] for r in responses}
    assert len(schedules) == 1  # byte-identical schedules
    after = {s: server.metric(s) - v for s, v in before.items()}
    assert after['pipesched_solves_total{outcome="ok"}'] == 1
    hits = after["pipesched_cache_hits_total"]
    assert after["pipesched_shared_solves_total"] + hits == 49 and sum(not b["cached"] for b in bodies) == 50 - hits
    store = Store(server.db)
    entry = store.get(problem_key(PROBLEM), "gpipe")
    assert entry is not None
    store.close()

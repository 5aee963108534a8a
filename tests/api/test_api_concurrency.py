"""Fifty identical requests in flight cost one solve and get one answer."""

from __future__ import annotations

import asyncio

import httpx

from pipesched.api.store import Store

PROBLEM = {"devices": 16, "microbatches": 256}  # ~12k ops: a solve long enough for all 50 to arrive


def test_50_concurrent_identical_requests_share_one_solve(make_server) -> None:  # noqa: ANN001
    server = make_server().start()

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
    assert server.metric('pipesched_solves_total{outcome="ok"}') == 1
    shared = server.metric("pipesched_shared_solves_total")
    hits = server.metric("pipesched_cache_hits_total")
    assert shared + hits == 49 and sum(not b["cached"] for b in bodies) == 50 - hits
    store = Store(server.db)
    assert store.count() == 1
    store.close()

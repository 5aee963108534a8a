"""The store fails and no answer is lost: a full disk still answers the schedule it computed (200,
with a warning and a header saying it was not stored), and a stopped PostgreSQL answers what it must
compute with 503 naming the store and the reason, with Retry-After, promptly, while cache hits in
memory are still served; /healthz tells the truth at once, and everything resumes unattended."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from api_servers import Server
from outages import Postgres, fill, small_disk

from pipesched.solver.core.canonical import problem_key

#: A problem whose schedule JSON is large (about 90 KB): a write a full disk cannot take.
BIG = {"devices": 4, "microbatches": 96}
WARNING = "x-pipesched-warning"


def test_a_full_disk_still_answers_the_computed_schedule_and_health_says_so(make_server) -> None:  # noqa: ANN001
    with small_disk("2m") as disk:
        server: Server = make_server(f"sqlite:///{disk / 'cache.db'}").start()
        assert server.get("/healthz").status_code == 200
        filler = fill(disk)
        r = server.post({"problem": BIG, "method": "gpipe"})
        assert r.status_code == 200, r.text
        assert r.json()["schedule"]["status"] in ("optimal", "feasible") and r.json()["cached"] is False
        assert "not stored in the cache" in r.headers[WARNING] and "the disk is full" in r.headers[WARNING]
        assert any("not stored in the cache" in w for w in r.json()["warnings"])
        again = server.post({"problem": BIG, "method": "gpipe"})  # from memory, still saying so
        assert again.status_code == 200 and again.json()["schedule"] == r.json()["schedule"]
        assert WARNING in again.headers
        health = server.get("/healthz")
        assert health.status_code == 503 and health.json() == {
            "status": "unavailable", "store": "sqlite", "reason": "the disk is full"}
        assert "Retry-After" in health.headers
        filler.unlink()  # room again: healthy, and the next solve is stored
        assert server.get("/healthz").status_code == 200
        fresh = server.post({"problem": {"devices": 4, "microbatches": 8}, "method": "gpipe"})
        assert fresh.status_code == 200 and WARNING not in fresh.headers
        stored = server.get(f"/v1/schedules/{problem_key({'devices': 4, 'microbatches': 8})}?method=gpipe")
        assert stored.status_code == 200
        server.stop()
        log = server.log.read_text()
        assert "database or disk is full" in log  # the library's words are in the log, not in a body


@pytest.fixture
def postgres() -> Iterator[Postgres]:
    pg = Postgres()
    pg.start()
    yield pg
    pg.close()


def test_a_stopped_postgresql_answers_503_with_retry_after_and_hits_from_memory(
        make_server, postgres: Postgres) -> None:  # noqa: ANN001
    server: Server = make_server(postgres.url).start()
    known = {"problem": {"devices": 1, "microbatches": 3}, "method": "gpipe"}  # proven optimal: final
    assert server.post(known).status_code == 200
    postgres.stop()
    with httpx.Client(base_url=server.url, timeout=15) as http:  # a hang fails the test (no timing asserted)
        health = http.get("/healthz")
        assert health.status_code == 503 and health.json()["reason"] == "cannot reach the database server"
        assert health.headers["Retry-After"]
        hit = http.post("/v1/solve", json=known)
        assert hit.status_code == 200 and hit.json()["cached"] is True
        miss = http.post("/v1/solve", json={"problem": {"devices": 2, "microbatches": 5}, "method": "gpipe"})
        assert miss.status_code == 503 and miss.headers["Retry-After"], miss.text
        body = miss.json()
        assert body["store"] == "postgresql" and body["reason"] == "cannot reach the database server"
        assert body["request_id"] == miss.headers["x-request-id"]
        assert "psycopg" not in miss.text and "sqlalche" not in miss.text  # no library text in a body
        entry = http.get(f"/v1/schedules/{problem_key(known['problem'])}?method=gpipe")
        assert entry.status_code == 200  # what is in memory is served
    postgres.start()  # and everything resumes without a restart of the service
    assert server.wait_healthy()
    again = server.post({"problem": {"devices": 2, "microbatches": 5}, "method": "gpipe"})
    assert again.status_code == 200 and WARNING not in again.headers

"""The cache survives restarts and kill -9, on SQLite and on PostgreSQL."""

from __future__ import annotations

import os
import time

from api_servers import SMALL, Server

from pipesched.api.store import Store
from pipesched.solver.canonical import problem_key

SLOW = {"devices": 32, "microbatches": 1000}


def test_entries_are_still_served_after_a_restart_on_sqlite(make_server) -> None:  # noqa: ANN001
    server = make_server().start()
    first = server.post({"problem": SMALL, "method": "gpipe"}).json()
    server.restart()
    again = server.post({"problem": SMALL, "method": "gpipe"}).json()
    assert again["cached"] is True and again["schedule"]["ops"] == first["schedule"]["ops"]
    assert server.get(f"/v1/schedules/{first['key']}").status_code == 200


def test_replicas_share_one_postgresql_cache_across_restarts(make_server, postgres_url: str, pg_prefix: str) -> None:  # noqa: ANN001
    env = {"PIPESCHED_TABLE_PREFIX": pg_prefix}
    one = make_server(db=postgres_url, env=env).start()
    two = make_server(db=postgres_url, env=env).start()
    assert one.get("/healthz").json()["store"] == "postgresql"
    first = one.post({"problem": SMALL, "method": "gpipe"}).json()
    assert first["cached"] is False
    assert two.post({"problem": SMALL, "method": "gpipe"}).json()["cached"] is True  # the other replica's solve
    one.restart()
    again = one.post({"problem": SMALL, "method": "gpipe"}).json()
    assert again["cached"] is True and again["schedule"] == first["schedule"]


def _group_gone(server: Server, pgid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_kill_9_during_a_solve_leaves_the_store_intact_and_no_solver_behind(make_server, tmp_path) -> None:  # noqa: ANN001
    server = make_server().start()
    kept = server.post({"problem": SMALL, "method": "gpipe"}).json()
    r = server.post({"problem": SLOW, "method": "gpipe", "time_limit_s": 60, "wait_s": 0})
    assert r.status_code == 202
    deadline = time.monotonic() + 30
    while server.metric("pipesched_solves_in_flight") < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.proc is not None
    pgid = server.proc.pid
    server.kill9()
    assert _group_gone(server, pgid), "solver processes outlived the killed service"
    store = Store(server.db)
    assert store.count() == 1 and store.get(problem_key(SLOW), "gpipe") is None  # no half-written entry
    store.close()
    server.start()
    assert server.post({"problem": SMALL, "method": "gpipe"}).json() == {**kept, "cached": True}
    assert server.get(f"/v1/schedules/{problem_key(SLOW)}").status_code == 404

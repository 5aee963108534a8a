"""The cache survives restarts and kill -9, on SQLite and on PostgreSQL."""

from __future__ import annotations

import time
from pathlib import Path

from api_servers import SMALL

from pipesched.api.store import Store
from pipesched.solver.core.canonical import problem_key

SLOW = {"devices": 32, "microbatches": 1000}


def test_replicas_share_one_postgresql_cache(make_server, postgres_url: str, pg_prefix: str) -> None:  # noqa: ANN001
    env = {"PIPESCHED_TABLE_PREFIX": pg_prefix}
    one = make_server(db=postgres_url, env=env).start()
    assert one.get("/healthz").json()["store"] == "postgresql"
    first = one.post({"problem": SMALL, "method": "gpipe"}).json()
    assert first["cached"] is False
    one.stop()
    two = make_server(db=postgres_url, env=env).start()  # another replica, after the first is gone
    again = two.post({"problem": SMALL, "method": "gpipe"}).json()
    assert again["cached"] is True and again["schedule"] == first["schedule"]


def _live_members(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that still run. Zombies do not count: they hold no memory, files or
    CPU, and whether init has reaped them yet (``os.killpg(pgid, 0)`` still finds them) is up to init."""
    live = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # exited while we looked
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":  # fields after the name: state, ppid, pgrp, ...
            live.append(int(stat.parent.name))
    return live


def _group_gone(pgid: int, timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _live_members(pgid):
            return True
        time.sleep(0.1)
    return False


def test_entries_survive_a_restart_and_a_kill_9_mid_solve_with_no_half_written_entry(make_server) -> None:  # noqa: ANN001
    server = make_server().start()
    kept = server.post({"problem": SMALL, "method": "gpipe"}).json()
    server.restart()
    assert server.post({"problem": SMALL, "method": "gpipe"}).json() == {**kept, "cached": True}

    r = server.post({"problem": SLOW, "method": "gpipe", "time_limit_s": 60, "wait_s": 0})
    assert r.status_code == 202
    deadline = time.monotonic() + 30
    while server.metric("pipesched_solves_in_flight") < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.proc is not None
    pgid = server.proc.pid
    server.kill9()
    assert _group_gone(pgid), "solver processes outlived the killed service"
    store = Store(server.db)
    assert store.count() == 1 and store.get(problem_key(SLOW), "gpipe") is None  # no half-written entry
    store.close()
    server.start()
    assert server.post({"problem": SMALL, "method": "gpipe"}).json() == {**kept, "cached": True}
    assert server.get(f"/v1/schedules/{problem_key(SLOW)}").status_code == 404

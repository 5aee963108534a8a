"""Two replicas and a worker started at the same instant on an empty database all come up: the
tables are created under a PostgreSQL advisory lock, so no starter dies on ``DuplicateTable`` or a
``pg_type`` unique violation (before, 1 to 3 of 5 such starts lost a process)."""

from __future__ import annotations

import os
from pathlib import Path

from scaleout_parts import (
    DEFAULT_PG,
    all_up,
    drop_database,
    fresh_database,
    need,
    need_module,
    start_at_once,
)


def test_two_replicas_and_a_worker_started_at_once_on_an_empty_database_all_come_up(tmp_path: Path) -> None:
    need_module("pgqueuer", "scaleout")
    admin = os.environ.get("PIPESCHED_TEST_POSTGRES_URL", DEFAULT_PG)
    for attempt in range(2):
        try:
            db = fresh_database(admin)
        except Exception as e:  # no server
            need(f"PostgreSQL at {admin} is not reachable ({type(e).__name__})", False)
        logs = tmp_path / str(attempt)
        logs.mkdir()
        ports, procs = start_at_once(db, logs)
        try:
            assert all_up(ports, procs) is None, (attempt, all_up(ports, procs, 0))
        finally:
            for proc in procs:
                proc.stop()
            drop_database(admin, db)

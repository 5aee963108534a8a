"""Fixtures for the scale-out tests: a fresh PostgreSQL database per module, two replicas, workers."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from scaleout_parts import DEFAULT_PG, Proc, Replica, admin_sql, need, need_module


@pytest.fixture(scope="module")
def pg_db() -> Iterator[str]:
    """A database of its own (dropped after), so queue, job and cache tables start empty and the
    reconnection test can terminate exactly this database's connections."""
    need_module("pgqueuer", "scaleout")
    admin = os.environ.get("PIPESCHED_TEST_POSTGRES_URL", DEFAULT_PG)
    name = f"pipesched_so_{uuid.uuid4().hex[:10]}"
    try:
        admin_sql(admin, f"CREATE DATABASE {name}")
    except Exception as e:  # no server
        need(f"PostgreSQL at {admin} is not reachable ({type(e).__name__})", False)
    base = admin.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        admin_sql(admin, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="module")
def replicas(pg_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Replica, Replica]]:
    """Two API replicas on two ports sharing one PostgreSQL (a load balancer would sit in front)."""
    logs = tmp_path_factory.mktemp("replicas")
    a = Replica(pg_db, logs / "a.log")
    try:
        b = Replica(pg_db, logs / "b.log")
    except Exception:
        a.stop()
        raise
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


@pytest.fixture
def workers(pg_db: str, tmp_path: Path) -> Iterator[list[Proc]]:
    """Workers the test starts itself (none at first, so it can queue jobs before any runs)."""
    started: list[Proc] = []
    try:
        yield started
    finally:
        for w in started:
            w.stop()

"""Real servers for the service tests: ``pipesched serve`` in a subprocess on a free loopback port.

PostgreSQL comes from ``PIPESCHED_TEST_POSTGRES_URL``; with ``PIPESCHED_REQUIRE_POSTGRES=1``
(as ``.ci/run`` sets) a missing server fails the tests instead of skipping them. Each run uses
its own table prefix there and drops its tables at the end, so parallel runs do not collide.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from api_servers import Server

from pipesched.api.store import Store


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator:
    """Factory for servers that are all stopped (and their process groups reaped) after the test."""
    made: list[Server] = []

    def make(db: str | None = None, **kwargs) -> Server:  # noqa: ANN003
        server = Server(db or f"sqlite:///{tmp_path / 'cache.db'}", log=tmp_path / f"server{len(made)}.log", **kwargs)
        made.append(server)
        return server

    yield make
    for server in made:
        server.stop()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server shared by the session, on a fresh SQLite file: tests only add entries and
    compare metrics before and after, so they do not depend on each other's order."""
    path = tmp_path_factory.mktemp("shared")
    s = Server(f"sqlite:///{path / 'cache.db'}", log=path / "server.log").start()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def postgres_url() -> str:
    url = os.environ.get("PIPESCHED_TEST_POSTGRES_URL")
    required = os.environ.get("PIPESCHED_REQUIRE_POSTGRES") == "1"
    if not url:
        if required:
            pytest.fail("PIPESCHED_REQUIRE_POSTGRES=1 but PIPESCHED_TEST_POSTGRES_URL is not set")
        pytest.skip("PostgreSQL tests need PIPESCHED_TEST_POSTGRES_URL")
    try:
        Store(url, f"probe{uuid.uuid4().hex[:8]}_").drop()
    except Exception as e:
        if required:
            pytest.fail(f"PostgreSQL expected at {url} but unusable: {e}")
        pytest.skip(f"no PostgreSQL at {url}: {e}")
    return url


@pytest.fixture
def pg_prefix(postgres_url: str) -> Iterator[str]:
    """A table prefix private to this test; its tables are dropped afterwards."""
    prefix = f"t{uuid.uuid4().hex[:12]}_"
    yield prefix
    Store(postgres_url, prefix).drop()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(url, table prefix) for both back-ends."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}", ""
    else:
        url = request.getfixturevalue("postgres_url")
        yield url, request.getfixturevalue("pg_prefix")

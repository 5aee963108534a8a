"""Schemathesis fuzzes every operation of the OpenAPI schema: no input makes the service answer 5xx."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from api_servers import Server
from hypothesis import HealthCheck, settings

#: Small caps keep every generated solve short: the fuzz is about the handlers, not the solver. Solves
#: end within the wait (0.05 s limit, 0.3 s wait), so most valid requests reach the response path.
FUZZ_ENV = {
    "PIPESCHED_SERVICE_MAX_OPS": "600", "PIPESCHED_SERVICE_MAX_DEVICES": "8", "PIPESCHED_MAX_TIME_LIMIT_S": "0.05",
    "PIPESCHED_MAX_WAIT_S": "0.3", "PIPESCHED_KILL_GRACE_S": "5", "PIPESCHED_MAX_QUEUED_SOLVES": "4",
}


@pytest.fixture(scope="module")
def fuzz_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[schemathesis.BaseSchema]:
    path: Path = tmp_path_factory.mktemp("fuzz")
    server = Server(f"sqlite:///{path / 'cache.db'}", env=FUZZ_ENV, log=path / "server.log").start()
    yield schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    server.stop()


schema = schemathesis.pytest.from_fixture("fuzz_schema")


@schema.parametrize()
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_generated_request_gets_a_server_error(case: schemathesis.Case) -> None:
    response = case.call(timeout=30)
    assert response.status_code < 500, f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:500]}"

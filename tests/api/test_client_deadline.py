"""The Client's one deadline: a service that accepts connections and never answers, or one whose
solver processes stay busy (429), costs at most ``deadline_s`` before ``fallback="local"`` solves here
(with a warning saying why); without the fallback, ServiceUnavailable says why. Retries honour the
service's ``Retry-After``."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from api_servers import SMALL, Server
from test_no_orphans import HARD_CPSAT

from pipesched.client import Client, ServiceUnavailable
from pipesched.solver import validate

REFUSED_429 = 'pipesched_http_requests_total{route="/v1/solve",method="POST",status="429"}'


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A port that completes TCP handshakes (the kernel's backlog) and never answers a byte."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


def test_a_service_that_never_answers_costs_the_deadline_then_the_local_fallback(silent_url: str) -> None:
    with Client(silent_url, fallback="local", cache_dir=False, deadline_s=2, connect_timeout_s=1) as client, \
            pytest.warns(RuntimeWarning, match="unreachable; solving 'gpipe' on this machine .*ReadTimeout"):
        schedule = client.solve(SMALL, method="gpipe", time_limit_s=1)
    assert validate(schedule) == []
    with Client(silent_url, cache_dir=False, deadline_s=2) as strict, \
            pytest.raises(ServiceUnavailable, match=r"within the deadline \(deadline_s = 2 s\)"):
        strict.solve(SMALL, method="gpipe", time_limit_s=1)


def test_a_service_that_stays_busy_is_retried_after_its_retry_after_then_the_fallback_solves(
        make_server) -> None:  # noqa: ANN001
    server: Server = make_server(env={"PIPESCHED_MAX_CONCURRENT_SOLVES": "1", "PIPESCHED_MAX_QUEUED_SOLVES": "0"})
    server.start()
    busy = server.post({"problem": HARD_CPSAT, "method": "cpsat", "time_limit_s": 60, "wait_s": 0})
    assert busy.status_code == 202  # the one solver process is taken
    with Client(server.url, fallback="local", cache_dir=False, deadline_s=3, backoff_s=0.01) as client, \
            pytest.warns(RuntimeWarning, match="HTTP 429: every solver process is busy"):
        schedule = client.solve(SMALL, method="gpipe", time_limit_s=1)
    assert validate(schedule) == [] and schedule.method == "gpipe"
    # Retry-After is 1 s: about three attempts in the 3 s, not the hundreds a 0.01 s back-off would make
    assert 2 <= server.metric(REFUSED_429) <= 4
    with Client(server.url, cache_dir=False, deadline_s=2, backoff_s=0.01) as strict, \
            pytest.raises(ServiceUnavailable, match="no answer from .* HTTP 429") as refused:
        strict.solve({"devices": 2, "microbatches": 6}, method="gpipe", time_limit_s=1)
    assert refused.value.status == 429

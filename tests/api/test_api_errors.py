"""A real server on loopback: unrepresentable numbers are a 422 naming the field and the range;
an unexpected error is a JSON 500 naming a request id that the server log has, with its traceback."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from api_servers import Server


def test_an_overflowing_cost_is_a_422_naming_the_field_and_the_range(server: Server) -> None:
    r = server.post({"problem": {"devices": 4, "microbatches": 4, "costs": {"forward": 1e308}}, "method": "greedy"})
    assert r.status_code == 422, r.text
    assert "costs.forward must be a finite number of magnitude <= 1e+12 (got 1e+308)" in r.json()["error"]
    assert "costs.forward[" not in r.json()["error"]  # a scalar is reported once, not per stage


def test_a_subnormal_memory_delta_is_a_422_naming_the_field(server: Server) -> None:
    memory = {"forward": 5e-324, "backward_input": -5e-324, "backward_weight": 0, "limit": 1e12}
    r = server.post({"problem": {"devices": 2, "microbatches": 3, "memory": memory}, "method": "cpsat"})
    assert r.status_code == 422, r.text  # was 500 OverflowError: limit / delta overflowed in the bounds
    assert "memory.forward must be 0 or of magnitude >= 1e-09" in r.json()["error"]


def test_an_unexpected_error_is_logged_with_its_traceback_and_a_json_500_names_its_request_id(
        make_server, tmp_path: Path) -> None:  # noqa: ANN001
    server: Server = make_server(f"sqlite:///{tmp_path / 'cache.db'}").start()
    with sqlite3.connect(tmp_path / "cache.db") as db:  # the store loses its table under the running server
        db.execute("DROP TABLE entries")
    r = server.get("/v1/schedules/" + "0" * 64)
    assert r.status_code == 500 and r.headers["content-type"] == "application/json", r.text
    rid = r.json()["request_id"]
    assert rid and r.headers["x-request-id"] == rid and rid in r.json()["detail"]
    server.stop()
    log = server.log.read_text()
    assert f"request {rid}: GET /v1/schedules/{'0' * 64} failed" in log, log
    assert "Traceback (most recent call last)" in log and "no such table: entries" in log, log


def test_every_response_carries_a_request_id_and_keeps_a_sane_one_it_was_given(server: Server) -> None:
    assert server.get("/healthz").headers["x-request-id"]
    assert server.get("/healthz", headers={"x-request-id": "trace-42"}).headers["x-request-id"] == "trace-42"


def test_no_limit_and_a_peak_above_1f1b_is_a_warning_in_the_response_and_a_relative_limit_resolves(
        server: Server) -> None:
    unlimited = {"problem": {"devices": 4, "microbatches": 12}, "method": "gpipe"}
    for _ in range(2):  # solved, then from the cache (the fast path builds the same body)
        r = server.post(unlimited)
        assert r.status_code == 200, r.text
        assert r.json()["warnings"] == ["no memory.limit: device 0 peaks at 12, above 1F1B's 4 there (3x); "
                                        "set memory.limit, e.g. \"1x1f1b\" (1F1B's memory) or \"1.5x1f1b\""]
    r = server.post({"problem": {"devices": 4, "microbatches": 12, "memory": {"limit": "1.5x1f1b"}}, "method": "greedy"})
    assert r.status_code == 200 and r.json()["warnings"] == [], r.text
    assert r.json()["schedule"]["problem"]["memory"]["limit"] == [6.0, 4.5, 3.0, 1.5]
    assert all(x <= c for x, c in zip(r.json()["schedule"]["peak_memory"], [6.0, 4.5, 3.0, 1.5], strict=True))

"""End to end through uvicorn on loopback: solve, cache, jobs, renderings, errors, caps, token."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from api_servers import SMALL, Server

from pipesched.solver import Problem, Schedule, solve, validate
from pipesched.solver.core.canonical import problem_key

#: A problem whose GPipe solve takes well over a second of wall-clock (96k ops to simulate and validate).
SLOW = {"devices": 32, "microbatches": 1000}


def test_solve_returns_the_schedule_the_cli_writes(server: Server) -> None:
    r = server.post({"problem": SMALL, "method": "gpipe"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["key"] == problem_key(SMALL)
    schedule = Schedule.model_validate(body["schedule"])
    assert validate(schedule) == []
    local = solve(Problem.model_validate(SMALL), "gpipe")
    assert schedule.model_dump(exclude={"solve_time_s"}) == local.model_dump(exclude={"solve_time_s"})


def test_an_equivalent_differently_written_problem_is_served_from_the_cache(server: Server) -> None:
    first = server.post({"problem": {"devices": 3, "microbatches": 5}, "method": "gpipe"}).json()
    solves = server.metric('pipesched_solves_total{outcome="ok"}')
    variant = {"microbatches": 5, "costs": {"forward": [1, 1, 1], "comm": 0}, "devices": 3, "placement": "loop",
               "memory": {"limit": None, "backward_weight": [-1.0, -1.0, -1.0]}}
    r = server.post({"method": "gpipe", "problem": variant})
    assert r.status_code == 200
    again = r.json()
    assert again["cached"] is True and again["key"] == first["key"]
    assert again["schedule"]["ops"] == first["schedule"]["ops"]
    assert again["schedule"]["problem"] == Problem.model_validate(variant).model_dump(mode="json")  # caller's own
    assert server.metric('pipesched_solves_total{outcome="ok"}') == solves


def test_a_cache_hit_returns_the_bytes_of_the_solving_answer_and_is_counted(server: Server) -> None:
    body = {"problem": {"devices": 2, "microbatches": 11, "costs": {"comm": 0.5}}, "method": "gpipe"}
    first = server.post(body)  # a miss: the route solves
    assert first.json()["cached"] is False
    counted = 'pipesched_http_requests_total{route="/v1/solve",method="POST",status="200"}'
    hits, requests = server.metric("pipesched_cache_hits_total"), server.metric(counted)
    indented = httpx.post(f"{server.url}/v1/solve", content=json.dumps(body, indent=2),
                          headers={"content-type": "application/json"})
    repeat = server.post(body)
    expected = first.content.replace(b'"cached":false', b'"cached":true', 1)
    assert indented.content == expected and repeat.content == expected
    assert repeat.headers["content-type"] == "application/json"
    assert server.metric("pipesched_cache_hits_total") == hits + 2 and server.metric(counted) == requests + 2


def test_a_larger_budget_resolves_a_non_optimal_entry_and_a_smaller_one_is_a_hit(server: Server) -> None:
    problem = {"devices": 2, "microbatches": 7}
    assert server.post({"problem": problem, "method": "1f1b", "time_limit_s": 1}).json()["cached"] is False
    status = server.get(f"/v1/schedules/{problem_key(problem)}?method=1f1b").json()["status"]
    bigger = server.post({"problem": problem, "method": "1f1b", "time_limit_s": 5}).json()
    assert bigger["cached"] is (status == "optimal")  # optimal entries are final, others improve
    assert server.post({"problem": problem, "method": "1f1b", "time_limit_s": 3}).json()["cached"] is True
    entry = server.get(f"/v1/schedules/{problem_key(problem)}?method=1f1b").json()
    assert entry["method"] == "1f1b" and entry["budget_s"] == (1 if status == "optimal" else 5)


def test_a_solve_longer_than_wait_s_returns_202_and_the_job_reports_the_result(server: Server) -> None:
    problem = {"devices": 4, "microbatches": 6}
    r = server.post({"problem": problem, "method": "gpipe", "wait_s": 0})
    assert r.status_code == 202 and r.headers["location"] == f"/v1/jobs/{r.json()['job']}"
    assert r.json()["key"] == problem_key(problem)
    job = server.wait_job(r.json()["job"])
    assert job["state"] == "done" and job["error"] is None
    assert Schedule.model_validate(job["result"]["schedule"]).problem == Problem.model_validate(problem)
    assert server.post({"problem": problem, "method": "gpipe"}).json()["cached"] is True
    assert server.get("/v1/jobs/nope").status_code == 404


def test_the_entry_and_torch_csv_are_served(server: Server) -> None:
    key = server.post({"problem": SMALL, "method": "gpipe"}).json()["key"]
    entry = server.get(f"/v1/schedules/{key}").json()
    assert entry["key"] == key and entry["schedule"]["status"] == entry["status"]
    assert entry["solve_time_s"] >= 0 and entry["budget_s"] > 0
    csv = server.get(f"/v1/schedules/{key}/torch.csv")
    assert csv.status_code == 200 and csv.headers["content-type"].startswith("text/csv")
    assert len(csv.text.strip().splitlines()) == SMALL["devices"]
    assert server.get(f"/v1/schedules/{'0' * 64}").status_code == 404
    assert server.get("/v1/schedules/not-a-key/gantt.svg").status_code == 422


def test_the_gantt_svg_is_served(server: Server) -> None:
    key = server.post({"problem": SMALL, "method": "gpipe"}).json()["key"]
    svg = server.get(f"/v1/schedules/{key}/gantt.svg")
    assert svg.status_code == 200 and svg.headers["content-type"] == "image/svg+xml"
    assert svg.text.lstrip().startswith("<svg") and svg.text.rstrip().endswith("</svg>")
    assert "gpipe" in svg.text  # the title line names the method


def test_the_page_openapi_health_and_metrics_are_served(server: Server) -> None:
    page = server.get("/")
    assert page.status_code == 200 and "/v1/solve" in page.text and "<textarea" in page.text
    assert "/v1/solve" in server.get("/openapi.json").json()["paths"]
    assert server.get("/docs").status_code == 200
    assert server.get("/healthz").json() == {"status": "ok", "store": "sqlite"}
    text = server.get("/metrics").text
    for series in ("pipesched_http_requests_total", "pipesched_cache_hits_total", "pipesched_cache_misses_total",
                   "pipesched_solves_in_flight", "pipesched_solve_seconds_bucket"):
        assert series in text


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"problem": {"devices": 0, "microbatches": 4}}, "problem", "devices must be >= 1"),
        ({"problem": {**SMALL, "costs": {"forward": [1.0, 2.0, 3.0]}}}, "problem", "costs.forward has 3 entries"),
        ({"problem": {**SMALL, "memory": {"forward": 2.0}}}, "problem", "activations would leak"),
        ({"problem": {**SMALL, "colour": "red"}}, "problem.colour", "Extra inputs"),
        ({"problem": SMALL, "time_limit_s": -1}, "time_limit_s", "greater than 0"),
        ({"problem": SMALL, "method": "magic"}, "method", "unknown method 'magic'"),
        ({"problem": SMALL, "method": "zb-v"}, "method", "does not apply"),
    ],
)
def test_a_bad_request_gets_422_naming_the_field(server: Server, body: dict, field: str, words: str) -> None:
    r = server.post({"method": "gpipe", **body})
    assert r.status_code == 422, r.text
    data = r.json()
    assert any(".".join(map(str, d["loc"][1:])) == field for d in data["detail"]), data
    assert words in data["error"]


def test_malformed_json_gets_422(server: Server) -> None:
    r = httpx.post(f"{server.url}/v1/solve", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422 and "error" in r.json()


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A locked-down server: token, tight caps, one solver process, no queue, no kill grace."""
    path = tmp_path_factory.mktemp("strict")
    env = {"PIPESCHED_SERVICE_MAX_DEVICES": "40", "PIPESCHED_SERVICE_MAX_OPS": "100000",
           "PIPESCHED_MAX_TIME_LIMIT_S": "30", "PIPESCHED_MAX_BODY_BYTES": "2000", "PIPESCHED_KILL_GRACE_S": "0",
           "PIPESCHED_MAX_CONCURRENT_SOLVES": "1", "PIPESCHED_MAX_QUEUED_SOLVES": "0"}
    server = Server(f"sqlite:///{path / 'cache.db'}", env=env, token="s3cret", log=path / "server.log").start()
    yield server
    server.stop()


AUTH = {"authorization": "Bearer s3cret"}


def test_post_needs_the_token_when_one_is_set(strict: Server) -> None:
    body = {"problem": SMALL, "method": "gpipe"}
    assert strict.post(body).status_code == 401
    assert strict.post(body, headers={"authorization": "Bearer wrong"}).status_code == 401
    r = strict.post(body, headers=AUTH)
    assert r.status_code == 200
    assert strict.post(body).status_code == 401  # the same bytes, now cached, still need the token
    assert strict.post(body, headers=AUTH).json()["cached"] is True
    assert strict.get(f"/v1/schedules/{r.json()['key']}").status_code == 200  # reads stay open
    assert strict.get("/healthz").status_code == 200


def test_caps_are_enforced_with_a_body_naming_the_cap(strict: Server) -> None:
    r = strict.post({"problem": {"devices": 41, "microbatches": 1}, "method": "gpipe"}, headers=AUTH)
    assert r.status_code == 422 and r.json()["detail"][0]["cap"] == "service_max_devices"
    assert r.json()["detail"][0]["loc"] == ["body", "problem", "devices"]
    r = strict.post({"problem": {"devices": 40, "microbatches": 900}, "method": "gpipe"}, headers=AUTH)  # 108k ops
    assert r.status_code == 422 and r.json()["detail"][0]["cap"] == "service_max_ops"
    r = strict.post({"problem": SMALL, "method": "gpipe", "time_limit_s": 31}, headers=AUTH)
    assert r.status_code == 422 and r.json()["detail"][0] == {
        "loc": ["body", "time_limit_s"], "type": "cap_exceeded", "cap": "max_time_limit_s", "limit": 30.0,
        "msg": "time_limit_s is 31, over this service's cap max_time_limit_s = 30"}
    big = {"problem": SMALL, "method": "gpipe", "pad": "x" * 3000}
    r = strict.post(big, headers=AUTH)
    assert r.status_code == 413 and r.json()["cap"] == "max_body_bytes" and r.json()["limit"] == 2000
    chunked = httpx.post(f"{strict.url}/v1/solve", content=iter([json.dumps(big).encode()]),
                         headers={"content-type": "application/json", **AUTH})
    assert chunked.status_code == 413  # no content-length: counted while reading


def test_an_overrunning_solver_is_killed_the_job_fails_and_the_service_stays_up(strict: Server) -> None:
    slow = strict.post({"problem": SLOW, "method": "gpipe", "time_limit_s": 0.3, "wait_s": 0}, headers=AUTH)
    assert slow.status_code == 202
    crowded = strict.post({"problem": {"devices": 2, "microbatches": 9}, "method": "gpipe"}, headers=AUTH)
    assert crowded.status_code == 429 and crowded.json()["cap"] == "max_queued_solves"  # the one process is busy
    job = strict.wait_job(slow.json()["job"])
    assert job["state"] == "failed" and "killed" in job["error"]
    assert strict.metric('pipesched_solves_total{outcome="killed"}') == 1
    assert strict.get("/healthz").status_code == 200
    assert strict.post({"problem": {"devices": 2, "microbatches": 9}, "method": "gpipe"}, headers=AUTH).status_code == 200
    assert strict.get(f"/v1/schedules/{problem_key(SLOW)}").status_code == 404  # nothing cached
    waited = strict.post({"problem": SLOW, "method": "gpipe", "time_limit_s": 0.3, "wait_s": 30}, headers=AUTH)
    assert waited.status_code == 504 and "killed" in waited.json()["detail"]


def test_a_proven_optimum_from_any_method_answers_auto_from_the_cache(server: Server) -> None:
    problem = {"devices": 1, "microbatches": 3}  # one device: no bubble, GPipe is provably optimal
    first = server.post({"problem": problem, "method": "gpipe"}).json()
    assert first["schedule"]["status"] == "optimal"
    solves = server.metric('pipesched_solves_total{outcome="ok"}')
    auto = server.post({"problem": problem, "method": "auto", "time_limit_s": 100}).json()
    assert auto["cached"] is True and auto["schedule"] == first["schedule"]
    assert server.metric('pipesched_solves_total{outcome="ok"}') == solves


def test_auto_solves_end_to_end(server: Server) -> None:
    problem = {"devices": 2, "microbatches": 3}
    r = server.post({"problem": problem, "method": "auto", "time_limit_s": 2})
    assert r.status_code == 200, r.text
    schedule = Schedule.model_validate(r.json()["schedule"])
    assert validate(schedule) == [] and schedule.status in ("optimal", "feasible")
    assert server.post({"problem": problem, "method": "auto", "time_limit_s": 2}).json()["cached"] is True

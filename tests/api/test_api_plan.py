"""``POST /v1/plan`` against a real server: plans, the plan cache, jobs and 422s naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from api_servers import Server

from pipesched.solver import validate
from pipesched.solver.planning import Cluster, Model, Plan
from pipesched.solver.planning.key import plan_key

EXAMPLE = json.loads((Path(__file__).resolve().parents[2] / "examples" / "plan_small.json").read_text())
TINY_MODEL = {"layers": [
    {"name": "embed", "forward": 0.5, "backward_weight": 0.5, "memory": {"forward": 0.5, "backward_input": -0.5},
     "static": 2.0, "output": 1.0},
    {"name": "block", "repeat": 4, "forward": 1.0, "backward_input": 1.0, "backward_weight": 1.0,
     "memory": {"forward": 2.0, "backward_input": -1.0, "backward_weight": -1.0}, "static": 3.0, "output": 1.0},
    {"name": "head", "forward": 2.0, "backward_input": 2.0, "backward_weight": 2.0,
     "memory": {"forward": 4.0, "backward_input": -3.0, "backward_weight": -1.0}, "static": 4.0},
]}
TINY_CLUSTER = {"devices": 2, "microbatches": 4, "memory_per_device": 40.0, "link": {"latency": 0.1}}


def post(server: Server, body: dict, **kwargs) -> httpx.Response:  # noqa: ANN003
    return httpx.post(f"{server.url}/v1/plan", json=body, timeout=90, **kwargs)


def test_the_readme_example_is_planned_validated_and_then_served_from_the_cache(server: Server) -> None:
    first = post(server, {**EXAMPLE, "time_limit_s": 3, "wait_s": 60})
    assert first.status_code == 200, first.text
    body = first.json()
    plan = Plan.model_validate(body["plan"])
    assert body["cached"] is False and plan.schedule is not None and validate(plan.schedule) == []
    assert plan.exports is not None and plan.exports.torch_csv.startswith("0F0")
    assert body["key"] == plan_key(Model.model_validate(EXAMPLE["model"]), Cluster.model_validate(EXAMPLE["cluster"]))
    # The same request written differently (a one-entry list of counts, defaults spelled out) is the same plan.
    same = {"model": EXAMPLE["model"], "cluster": {**EXAMPLE["cluster"], "microbatches": [16], "placement": "loop"},
            "time_limit_s": 2}
    again = post(server, same)
    assert again.status_code == 200 and again.json()["cached"] is True and again.json()["key"] == body["key"]
    assert again.json()["plan"] == body["plan"]


def test_a_plan_not_done_within_wait_s_is_a_job_whose_result_is_the_plan(server: Server) -> None:
    request = {"model": TINY_MODEL, "cluster": {**TINY_CLUSTER, "microbatches": 5}, "method": "greedy",
               "time_limit_s": 1.5, "wait_s": 0}
    accepted = post(server, request)
    assert accepted.status_code == 202, accepted.text
    job = accepted.json()["job"]
    assert accepted.headers["location"] == f"/v1/jobs/{job}"
    state = server.wait_job(job)
    assert state["state"] == "done" and state["method"] == "greedy", state
    plan = Plan.model_validate(state["result"]["plan"])
    assert plan.method == "greedy" and plan.schedule is not None and validate(plan.schedule) == []
    assert state["result"]["key"] == accepted.json()["key"]


def test_a_model_that_fits_no_device_is_an_infeasible_plan_naming_the_layer(server: Server) -> None:
    r = post(server, {"model": TINY_MODEL, "cluster": {**TINY_CLUSTER, "memory_per_device": 6.0},
                      "method": "greedy", "time_limit_s": 1})
    assert r.status_code == 200, r.text
    plan = r.json()["plan"]
    assert plan["status"] == "infeasible" and plan["schedule"] is None
    assert "layer 5 (head)" in plan["reason"]


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"cluster": {**TINY_CLUSTER, "devices": 0}}, "cluster.devices", "greater than or equal to 1"),
    ({"cluster": {**TINY_CLUSTER, "placement": "v"}}, "cluster", "stages_per_device = 2"),
    ({"model": {"layers": []}}, "model.layers", "at least 1 item"),
    ({"method": "magic"}, "method", "unknown method 'magic'"),
    ({"module_names": "embed"}, "module_names", "INPUT;BLOCK;OUTPUT"),
    ({"module_names": ";{i}{;"}, "module_names", "no other braces"),  # was a 500: the export's format failed
    ({"time_limit_s": 10_000}, "time_limit_s", "max_time_limit_s"),
    ({"cluster": {**TINY_CLUSTER, "microbatches": [4, 5000]}}, "cluster", "between 1 and 4096"),
    ({"extra": 1}, "extra", "Extra inputs are not permitted"),
])
def test_bad_plan_requests_get_a_422_naming_the_field(server: Server, change: dict, field: str, words: str) -> None:
    r = post(server, {"model": TINY_MODEL, "cluster": TINY_CLUSTER, **change})
    assert r.status_code == 422, r.text
    body = r.json()
    assert any(".".join(str(x) for x in d["loc"][1:]) == field for d in body["detail"]), body
    assert words in body["error"] and body["error"].startswith(field)


def test_a_body_that_is_not_json_gets_a_422_too(server: Server) -> None:
    r = httpx.post(f"{server.url}/v1/plan", content=b"{not json", timeout=30,
                   headers={"content-type": "application/json"})
    assert r.status_code == 422 and "error" in r.json()


def test_the_plan_route_is_in_the_openapi_document_with_its_request_schema(server: Server) -> None:
    doc = server.get("/openapi.json").json()
    assert "/v1/plan" in doc["paths"]
    assert "PlanRequest" in doc["components"]["schemas"]
    assert set(doc["components"]["schemas"]["PlanRequest"]["required"]) == {"model", "cluster"}


def test_a_service_with_a_token_refuses_a_plan_without_it(make_server) -> None:  # noqa: ANN001
    server = make_server(token="s3cret").start()
    assert post(server, {"model": TINY_MODEL, "cluster": TINY_CLUSTER}).status_code == 401
    r = post(server, {"model": TINY_MODEL, "cluster": TINY_CLUSTER, "method": "greedy", "time_limit_s": 1},
             headers={"authorization": "Bearer s3cret"})
    assert r.status_code == 200 and r.json()["plan"]["status"] in ("optimal", "feasible")

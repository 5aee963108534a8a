"""The OpenAPI document states what the service accepts: a request generated from the request schema
(schemathesis, positive mode) that also keeps the cross-field rules the schema's description states
is accepted (200, or 202 / 429 under load), on both POST routes. Before, the schema allowed devices 0
and microbatches 0, which the service refused with 422."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from api_servers import Server
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.generation import GenerationMode

ENV = {"PIPESCHED_SERVICE_MAX_OPS": "600", "PIPESCHED_SERVICE_MAX_DEVICES": "8", "PIPESCHED_MAX_TIME_LIMIT_S": "0.3",
       "PIPESCHED_MAX_WAIT_S": "0.3", "PIPESCHED_KILL_GRACE_S": "5", "PIPESCHED_MAX_QUEUED_SOLVES": "4"}
MAX_OPS = 600
#: A layer's time and memory figures (what a stage sums).
FIGURES = {"forward", "backward_input", "backward_weight", "static", "output"}
#: A method that applies to every problem (the stated rule: the method applies to the problem; greedy, say,
#: refuses a memory limit below what its first step needs).
ANY_PROBLEM = {"auto"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Any]]:
    path: Path = tmp_path_factory.mktemp("schema")
    server = Server(f"sqlite:///{path / 'cache.db'}", env=ENV, log=path / "server.log").start()
    yield server, schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    server.stop()


def _fit(value: Any, n: int) -> Any:
    """A per-stage list with ``n`` entries (cycled), or the number as it is."""
    return [value[i % len(value)] for i in range(n)] if isinstance(value, list) and n else value


def _ok(x: float) -> bool:
    return x == 0 or 1e-9 <= abs(x) <= 1e12


def keep_solve_rules(body: dict[str, Any]) -> dict[str, Any]:
    """The schema's stated cross-field rules, applied to a generated body (SOLVE_RULES, in words there)."""
    p = body["problem"]
    for name in ("devices", "microbatches", "stages_per_device"):  # JSON integers may come as 2.0
        if name in p:
            p[name] = int(p[name])
    placement = p.get("placement", "loop")
    if placement in ("v", "dual"):
        p["stages_per_device"] = 2
    if placement == "dual" and p["devices"] % 2:
        p["devices"] += 1 if p["devices"] < 8 else -1
    if placement != "dual":
        p.pop("dual_split", None)
    v, per_op = p.get("stages_per_device", 1), 3 if p.get("split_backward", True) else 2
    p["microbatches"] = max(1, min(p["microbatches"], MAX_OPS // (p["devices"] * v * per_op)))
    if placement == "dual":
        p["microbatches"] = max(p["microbatches"], 2)
    if p.get("dual_split") is not None:
        p["dual_split"] = min(p["dual_split"], p["microbatches"])
    stages = p["devices"] if placement == "dual" else p["devices"] * v
    costs, memory = p.setdefault("costs", {}), p.setdefault("memory", {})
    for part in (costs, memory):
        for name in list(part):
            if name not in ("comm", "limit", "optimizer"):
                part[name] = _fit(part[name], stages)
    if isinstance(costs.get("comm"), list):
        costs["comm"] = _fit(costs["comm"], stages - 1) if stages > 1 else costs["comm"][0]
    for part, name in ((memory, "limit"), (costs, "optimizer")):  # one per device
        if isinstance(part.get(name), list):
            part[name] = _fit(part[name], p["devices"])
    deltas = [memory.get(k, d) for k, d in (("forward", 1.0), ("backward_input", 0.0), ("backward_weight", -1.0))]
    per_stage = [[x[s] if isinstance(x, list) else x for x in deltas] for s in range(stages)]
    weights = [-(f + b) for f, b, _ in per_stage]
    if all(_ok(w) and math.isclose(f + b + w, 0, abs_tol=1e-9 * max(1, abs(f), abs(b))) for (f, b, _), w
           in zip(per_stage, weights, strict=True)):
        memory["backward_weight"] = weights
    else:  # the stage's deltas cannot sum to 0 within the accepted magnitudes: the defaults do
        for k in ("forward", "backward_input", "backward_weight"):
            memory.pop(k, None)
    forward = memory.get("forward", 1.0)
    if isinstance(memory.get("limit"), str) and min(forward if isinstance(forward, list) else [forward]) < 0:
        memory["limit"] = None  # a multiple of 1F1B's peak needs a peak >= 0
    if body.get("method") not in ANY_PROBLEM:
        body["method"] = "auto"
    return body


def keep_plan_rules(body: dict[str, Any]) -> dict[str, Any]:
    """PLAN_RULES: layer deltas sum to 0, 'v' needs v = 2, memory per device, the op cap."""
    c = body["cluster"]
    for name in ("devices", "stages_per_device"):
        if name in c:
            c[name] = int(c[name])
    if c.get("placement") == "v":
        c["stages_per_device"] = 2
    v, per_op = c.get("stages_per_device", 1), 3 if c.get("split_backward", True) else 2
    top = max(1, MAX_OPS // (c["devices"] * v * per_op))
    c["microbatches"] = ([min(m, top) for m in c["microbatches"]] if isinstance(c["microbatches"], list)
                         else min(c["microbatches"], top))
    dp = c.get("data_parallel")
    if dp:  # a stage's gradient sync (its layers' gradients over the degree and the link) stays within 1e12
        dp["degree"] = min(int(dp.get("degree", 1)), 8)
        link = dp.get("link") or {}
        link["latency"] = min(link.get("latency", 0.0), 1e6)
        if link.get("bandwidth") is not None:
            link["bandwidth"] = max(link["bandwidth"], 1.0)
    if c.get("inter_node_link") is not None and c.get("devices_per_node") is None:
        c.pop("inter_node_link")  # it needs devices_per_node
    if isinstance(c.get("memory_per_device"), list):
        c["memory_per_device"] = _fit(c["memory_per_device"], c["devices"])
    layers = body["model"]["layers"]
    bound = 1e12 / (8 * 4 * len(layers))  # a stage's sums (recompute adds F to B) stay within 1e12
    for layer in layers:
        layer["repeat"] = min(int(layer.get("repeat", 1)), 4)
        for name in ("gradient", "optimizer"):  # what the sync and the optimizer step move
            if name in layer:
                layer[name] = min(layer[name], bound)
        for holder in (layer, layer.get("recompute") or {}, layer.get("memory") or {},
                       (layer.get("recompute") or {}).get("memory") or {}):
            for name, x in holder.items():
                if name in FIGURES and isinstance(x, float | int) and abs(x) > bound:
                    holder[name] = math.copysign(bound, x)
        comm = layer.get("comm")
        if comm is not None:  # the collective part of F and B is at most F and B
            for name in ("forward", "backward_input"):
                if name in comm:
                    comm[name] = min(comm[name], layer.get(name, 0.0))
        for holder in (layer, layer.get("recompute") or {}):
            mem = holder.get("memory")
            if mem is not None:
                w = -(mem.get("forward", 0.0) + mem.get("backward_input", 0.0))
                if _ok(w):
                    mem["backward_weight"] = w
                else:
                    holder["memory"] = {}
    if body.get("method") not in ANY_PROBLEM:
        body["method"] = "auto"
    return body


@pytest.mark.parametrize(("path", "keep"), [("/v1/solve", keep_solve_rules), ("/v1/plan", keep_plan_rules)])
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(data=st.data())
def test_a_request_the_schema_and_its_stated_rules_allow_is_accepted(served: tuple[Server, Any], path: str,
                                                                     keep: Any, data: st.DataObject) -> None:
    server, schema = served
    case = data.draw(schema[path]["POST"].as_strategy(generation_mode=GenerationMode.POSITIVE))
    body = keep(case.body)
    r = httpx.post(f"{server.url}{path}", json=body, timeout=120)
    assert r.status_code in (200, 202, 429), _failure(server, r, body)


def _failure(server: Server, r: httpx.Response, body: dict[str, Any]) -> str:
    """What a refused request needs to be diagnosed from a CI log alone: the answer first (the detail of
    a 500 names the exception), whether the server is still our process, its log's tail, then the body."""
    alive = server.proc is not None and server.proc.poll() is None
    log = server.log.read_text(errors="replace")[-3000:] if server.log and server.log.exists() else ""
    return (f"{r.status_code}: {r.text[:2000]}\nserver process alive: {alive}\nserver log tail:\n{log}\n"
            f"body: {json.dumps(body)[:3000]}")


def test_the_schema_states_ranges_caps_and_methods(served: tuple[Server, Any]) -> None:
    server, _ = served
    schemas = server.get("/openapi.json").json()["components"]["schemas"]
    devices = schemas["SolveRequest_Problem"]["properties"]["devices"]
    assert (devices["minimum"], devices["maximum"]) == (1, 8)  # the service's cap, from its settings
    assert "greedy" in schemas["SolveRequest"]["properties"]["method"]["enum"]
    assert "service_max_ops" in schemas["SolveRequest"]["description"]

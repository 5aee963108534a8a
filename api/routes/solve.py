"""``POST /v1/solve``: answer from the cache, or solve (sharing identical solves in flight).

Which cache entry answers a request (the key is the problem alone; the method picks a slot):

- method ``X`` other than ``auto`` is served from the entry solved with ``X`` (a user asking for
  ``1f1b`` wants the 1F1B schedule, not a better one);
- ``auto`` means "the best you can do": a proven-optimal schedule from any method answers it
  at once, and an ``auto`` solve is warm-started from the best schedule any method has found;
- an entry that is final (optimal or infeasible) or was given at least ``time_limit_s`` is
  served as is; otherwise the request solves again with the larger budget, warm-started from
  the entry, and the store keeps whichever schedule is better;
- a request that arrives while a solve of the same (key, method) runs joins that solve, whatever
  its own ``time_limit_s`` (it can ask again with the larger budget once the entry exists).
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from pipesched.solver.core.canonical import problem_key
from pipesched.solver.core.errors import NotApplicableError
from pipesched.solver.core.registry import get_method

from ..bodies import failed_job_response, solve_response, validation_error_response
from ..cache import Accepted
from ..deps import token_refusal
from ..jobs import Overloaded
from ..models import ErrorBody, JobAccepted, SolveRequest, SolveResponse, ValidationErrorBody
from ..service import Service
from ..settings import Settings

router = APIRouter(tags=["solve"])


@router.post(
    "/v1/solve",
    response_model=SolveResponse,
    # The body is parsed by hand (pydantic straight from the JSON bytes, no dependency machinery):
    # this is the cache-hit hot path. The schema is still documented for clients and fuzzers.
    openapi_extra={"requestBody": {"required": True, "content": {
        "application/json": {"schema": {"$ref": "#/components/schemas/SolveRequest"}}}}},
    responses={
        202: {"model": JobAccepted, "description": "Not done within wait_s: poll GET /v1/jobs/{job}."},
        401: {"model": ErrorBody, "description": "The service has a token and the request lacks it."},
        413: {"model": ErrorBody, "description": "Request body over the size cap."},
        422: {"model": ValidationErrorBody, "description": "Bad problem, unknown or inapplicable method, or over a cap."},
        429: {"model": ErrorBody, "description": "Too many distinct solves running or queued."},
        504: {"model": ErrorBody, "description": "The solver overran its hard wall-clock limit and was killed."},
    },
)
async def solve(request: Request) -> Response:
    """Solve a problem, or answer from the cache (see the module docstring for which entry answers)."""
    svc: Service = request.app.state.service
    refused = token_refusal(svc.settings.token, request.headers.get("authorization"))
    if refused is not None:
        return refused
    body = await request.body()
    accepted = svc.accepted.get(body)  # a body seen before skips validation and canonicalisation
    if accepted is None:
        checked = accept(body, svc.settings)
        if isinstance(checked, JSONResponse):
            return checked
        accepted = svc.accepted.put(body, checked)
    key, method, problem_json = accepted.key, accepted.method, accepted.problem_json
    time_limit_s = accepted.time_limit_s
    hit = svc.cache.get(key, method)
    if hit is not None and hit.entry.satisfies(time_limit_s):
        svc.metrics.cache_hits += 1
        return solve_response(key, True, hit, problem_json)
    hint = hit
    if method == "auto":
        best = svc.cache.best(key)
        if best is not None and best.entry.status == "optimal":
            svc.metrics.cache_hits += 1
            return solve_response(key, True, best, problem_json)
        if best is not None and _better(best.entry.objective_value, hint.entry.objective_value if hint else None):
            hint = best
    svc.metrics.cache_misses += 1
    try:
        job, _shared = svc.jobs.submit(key, method, problem_json, time_limit_s, hint)
    except Overloaded as e:
        return JSONResponse({"detail": str(e), "cap": e.cap, "limit": e.limit}, status_code=429,
                            headers={"Retry-After": "1"})
    try:
        await asyncio.wait_for(job.done.wait(), accepted.wait_s)
    except TimeoutError:
        return JSONResponse({"job": job.id, "key": key, "state": job.state}, status_code=202,
                            headers={"Location": f"/v1/jobs/{job.id}"})
    if job.state == "done" and job.hit is not None:
        return solve_response(key, False, job.hit, problem_json)
    return failed_job_response(job)


def accept(body: bytes, settings: Settings) -> Accepted | JSONResponse:
    """Parse and check a request body: the request to act on, or the 422 saying what is wrong."""
    try:
        req = SolveRequest.model_validate_json(body)
    except ValidationError as e:
        return validation_error_response(e.errors(), ("body",))
    time_limit_s = req.time_limit_s if req.time_limit_s is not None else settings.default_time_limit_s
    refused = _over_caps(req, time_limit_s, settings) or _method_error(req)
    if refused is not None:
        return refused
    wait_s = min(req.wait_s if req.wait_s is not None else settings.default_wait_s, settings.max_wait_s)
    return Accepted(key=problem_key(req.problem), method=req.method, problem_json=req.problem.model_dump_json(),
                    time_limit_s=time_limit_s, wait_s=wait_s)


def _better(a: float | None, b: float | None) -> bool:
    return a is not None and (b is None or a < b)


def _over_caps(req: SolveRequest, time_limit_s: float, settings: Settings) -> JSONResponse | None:
    """422 naming every service cap the request exceeds (the problem model has its own, looser, ones)."""
    p = req.problem
    checks: list[tuple[str, float, float, list[str]]] = [
        ("service_max_devices", p.devices, settings.service_max_devices, ["problem", "devices"]),
        ("service_max_microbatches", p.microbatches, settings.service_max_microbatches, ["problem", "microbatches"]),
        ("service_max_stages_per_device", p.stages_per_device, settings.service_max_stages_per_device,
         ["problem", "stages_per_device"]),
        ("service_max_ops", p.num_ops, settings.service_max_ops, ["problem"]),
        ("max_time_limit_s", time_limit_s, settings.max_time_limit_s, ["time_limit_s"]),
    ]
    detail: list[dict[str, Any]] = []
    for cap, value, limit, loc in checks:
        if value > limit:
            what = "the problem's op count" if cap == "service_max_ops" else loc[-1]
            detail.append({
                "loc": ["body", *loc], "type": "cap_exceeded", "cap": cap, "limit": limit,
                "msg": f"{what} is {value:g}, over this service's cap {cap} = {limit:g}",
            })
    if not detail:
        return None
    line = "; ".join(f"{'.'.join(d['loc'][1:])}: {d['msg']}" for d in detail)
    return JSONResponse({"detail": detail, "error": line}, status_code=422)


def _method_error(req: SolveRequest) -> JSONResponse | None:
    try:
        reason = get_method(req.method).applies(req.problem)
        if reason:
            raise NotApplicableError(f"method {req.method!r} does not apply: {reason}")
    except NotApplicableError as e:
        detail = [{"loc": ["body", "method"], "msg": str(e), "type": "not_applicable"}]
        return JSONResponse({"detail": detail, "error": f"method: {e}"}, status_code=422)
    return None

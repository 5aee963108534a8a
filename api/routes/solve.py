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

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ..accept import accept
from ..bodies import failed_job_response, solve_response
from ..deps import token_refusal
from ..models import ErrorBody, JobAccepted, SolveResponse, ValidationErrorBody
from ..scaleout import PRIORITY_HEADER
from ..service import Service
from ..solving.jobs import Overloaded

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
    if svc.external is not None:  # --workers external: the shared queue, any replica, any worker
        return await svc.external.solve(accepted, hint, request.headers.get(PRIORITY_HEADER))
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


def _better(a: float | None, b: float | None) -> bool:
    return a is not None and (b is None or a < b)

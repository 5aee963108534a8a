"""``POST /v1/plan``: a model and a cluster in, the planned split, recompute and schedule out.

Cached by the canonical key of (model, cluster, module names) with one slot per method, like
``/v1/solve``: a final plan (optimal, infeasible) or one given at least ``time_limit_s`` answers at
once; otherwise the request plans (joining an identical plan in flight) and waits up to ``wait_s``,
then answers 202 with a job to poll at ``GET /v1/jobs/{job}`` (:mod:`pipesched.api.plan_jobs`).
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ..deps import token_refusal
from ..models import ErrorBody, JobAccepted, ValidationErrorBody
from ..plan_accept import accept_plan
from ..plan_jobs import PlanJob, PlanJobs, plan_response_json
from ..plan_models import PlanResponse
from ..service import Service
from ..solving.jobs import Overloaded

router = APIRouter(tags=["plan"])


@router.post(
    "/v1/plan",
    response_model=PlanResponse,
    # The body is parsed by hand like /v1/solve's (one 422 shape, token checked first); the schema is
    # added to the OpenAPI document by the app.
    openapi_extra={"requestBody": {"required": True, "content": {
        "application/json": {"schema": {"$ref": "#/components/schemas/PlanRequest"}}}}},
    responses={
        202: {"model": JobAccepted, "description": "Not done within wait_s: poll GET /v1/jobs/{job}."},
        401: {"model": ErrorBody, "description": "The service has a token and the request lacks it."},
        413: {"model": ErrorBody, "description": "Request body over the size cap."},
        422: {"model": ValidationErrorBody, "description": "Bad model or cluster, unknown or inapplicable method, "
              "or over a cap."},
        429: {"model": ErrorBody, "description": "Too many distinct solves and plans running or queued."},
        504: {"model": ErrorBody, "description": "The planner overran its hard wall-clock limit and was killed."},
    },
)
async def plan(request: Request) -> Response:
    """Plan a model on a cluster, or answer from the plan cache (see the module docstring)."""
    svc: Service = request.app.state.service
    refused = token_refusal(svc.settings.token, request.headers.get("authorization"))
    if refused is not None:
        return refused
    accepted = accept_plan(await request.body(), svc.settings)
    if isinstance(accepted, JSONResponse):
        return accepted
    plans: PlanJobs = request.app.state.plans
    hit = await asyncio.to_thread(plans.cached, accepted.key, accepted.method)
    if hit is not None and hit.satisfies(accepted.time_limit_s):
        return Response(plan_response_json(accepted.key, True, hit), media_type="application/json")
    try:
        job = plans.submit(accepted)
    except Overloaded as e:
        return JSONResponse({"detail": str(e), "cap": e.cap, "limit": e.limit}, status_code=429,
                            headers={"Retry-After": "1"})
    try:
        await asyncio.wait_for(asyncio.shield(job.done.wait()), accepted.wait_s)
    except TimeoutError:
        return JSONResponse({"job": job.id, "key": job.key, "state": job.state}, status_code=202,
                            headers={"Location": f"/v1/jobs/{job.id}"})
    if job.state == "done" and job.entry is not None:
        return Response(plan_response_json(job.key, False, job.entry), media_type="application/json")
    return failed_plan_response(job)


def failed_plan_response(job: PlanJob) -> JSONResponse:
    """A plan that ended without an answer: 422 when the method does not apply, else 504/500."""
    if job.outcome == "not_applicable":
        detail = [{"loc": ["body", "method"], "msg": job.error or "", "type": "not_applicable"}]
        return JSONResponse({"detail": detail, "error": f"method: {job.error}"}, status_code=422)
    return JSONResponse({"detail": job.error or "the plan failed", "job": job.id, "key": job.key,
                         "state": job.state}, status_code=504 if job.outcome == "killed" else 500)

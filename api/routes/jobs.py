"""``GET /v1/jobs/{job}``: the state of a solve that outlived its request's ``wait_s``."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ..bodies import job_json
from ..deps import ServiceDep
from ..models import ErrorBody, JobStatus
from ..plan_jobs import plan_job_json

router = APIRouter(tags=["jobs"])


@router.get("/v1/jobs/{job}", response_model=JobStatus, responses={404: {"model": ErrorBody}})
async def get_job(job: str, svc: ServiceDep, request: Request) -> Response:
    """State: queued, running, done (with ``result`` as POST /v1/solve, or POST /v1/plan, would give it) or
    failed (with ``error``).

    Jobs live in the memory of the replica that started them (finished ones are kept for a while),
    or, with ``--workers external``, in the shared PostgreSQL job table that every replica reads.
    """
    if svc.external is not None:
        return await svc.external.job_response(job)
    found = svc.jobs.get(job)
    if found is None and (planning := request.app.state.plans.get(job)) is not None:  # a POST /v1/plan job
        return Response(plan_job_json(planning), media_type="application/json")
    if found is None:
        return JSONResponse({"detail": f"no job {job!r} on this server (unknown, or finished long ago)"},
                            status_code=404)
    return Response(job_json(found), media_type="application/json")

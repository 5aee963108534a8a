"""``GET /v1/jobs/{job}``: the state of a solve or plan that outlived its request's ``wait_s``."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from ...models import ErrorBody, JobStatus
from ...services.jobs_report import job_report
from ..deps import ServiceDep, respond

router = APIRouter(tags=["jobs"])


@router.get("/v1/jobs/{job}", response_model=JobStatus, responses={404: {"model": ErrorBody}})
async def get_job(job: str, svc: ServiceDep) -> Response:
    """State: queued, running, done (with ``result`` as POST /v1/solve, or POST /v1/plan, would give it) or
    failed (with ``error``).

    Jobs live in the memory of the replica that started them (finished ones are kept for a while),
    or, with ``--workers external``, in the shared PostgreSQL job table that every replica reads.
    """
    return respond(await job_report(svc, job))

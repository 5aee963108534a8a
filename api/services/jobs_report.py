"""``GET /v1/jobs/{job}``: a solve's or a plan's job, wherever it lives."""

from __future__ import annotations

from .plan import plan_job_json
from .replies import Reply, job_json, json_reply
from .state import Service


async def job_report(svc: Service, job_id: str) -> Reply:
    if svc.external is not None:  # the shared job table, whichever replica enqueued it
        return await svc.external.job_reply(job_id)
    job = svc.jobs.get(job_id)
    if job is not None:
        return Reply(200, job_json(job))
    planning = svc.plans.get(job_id)
    if planning is not None:
        return Reply(200, plan_job_json(planning))
    return json_reply(404, {"detail": f"no job {job_id!r} on this server (unknown, or finished long ago)"})

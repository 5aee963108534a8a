"""Response bodies built from stored JSON text, so a cache hit never re-serialises a schedule."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from fastapi.responses import JSONResponse, Response

from .cache import Hit
from .errors import REQUEST_ID, log
from .solving.jobs import Job


def solve_json(key: str, cached: bool, hit: Hit, problem_json: str) -> str:
    """``{"key", "cached", "schedule", "warnings"}`` with the caller's own problem inside the schedule."""
    return (f'{{"key":"{key}","cached":{"true" if cached else "false"},"schedule":{hit.schedule_json(problem_json)},'
            f'"warnings":{hit.warnings_json}}}')


def solve_response(key: str, cached: bool, hit: Hit, problem_json: str) -> Response:
    return Response(solve_json(key, cached, hit, problem_json), media_type="application/json")


def entry_response(hit: Hit) -> Response:
    e = hit.entry
    head = {
        "key": e.key, "method": e.method, "status": e.status, "objective_value": e.objective_value,
        "lower_bound": e.lower_bound, "budget_s": e.budget_s, "solve_time_s": e.solve_time_s,
        "created_at": e.created_at, "updated_at": e.updated_at,
    }
    text = json.dumps(head, separators=(",", ":"))[:-1] + f',"schedule":{e.schedule_json}}}'
    return Response(text, media_type="application/json")


def job_json(job: Job) -> str:
    head = {
        "job": job.id, "key": job.key, "method": job.method, "state": job.state, "error": job.error,
        "created_at": job.created_at, "finished_at": job.finished_at,
    }
    text = json.dumps(head, separators=(",", ":"))[:-1]
    if job.state == "done" and job.hit is not None:
        return text + f',"result":{solve_json(job.key, False, job.hit, job.problem_json)}}}'
    return text + ',"result":null}'


def validation_error_response(errors: Sequence[Any], prefix: tuple[str, ...] = ()) -> JSONResponse:
    """422 with every error as ``{loc, msg, type}`` and one readable line naming the fields."""
    detail = []
    for e in errors:
        msg = str(e.get("msg", "")).removeprefix("Value error, ")
        loc = [*prefix, *(x if isinstance(x, int) else str(x) for x in e.get("loc", ()))]
        detail.append({"loc": loc, "msg": msg, "type": str(e.get("type", "value_error"))})
    line = "; ".join(f"{'.'.join(str(x) for x in d['loc'][1:]) or 'body'}: {d['msg']}" for d in detail)
    return JSONResponse({"detail": detail, "error": line}, status_code=422)


def failed_job_response(job: Job) -> JSONResponse:
    """A solve that ended without a schedule: 422 when the method does not apply, else 504/500."""
    if job.outcome == "not_applicable":
        detail = [{"loc": ["body", "method"], "msg": job.error or "", "type": "not_applicable"}]
        return JSONResponse({"detail": detail, "error": f"method: {job.error}"}, status_code=422)
    status = 504 if job.outcome == "killed" else 500
    rid = REQUEST_ID.get()
    if status == 500:  # a solver bug or a crashed process: the log line the request id points to
        log.error("request %s: job %s (key %s, method %s) failed: %s", rid, job.id, job.key, job.method, job.error)
    return JSONResponse(
        {"detail": job.error or "the solve failed", "job": job.id, "key": job.key, "state": job.state,
         "request_id": rid},
        status_code=status,
    )

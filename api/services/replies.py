"""What the service answers, as data: :class:`Reply` (status, JSON text, headers), built from stored
JSON text so a cache hit never re-serialises a schedule. The HTTP layer turns a Reply into a
response (``pipesched.api.http``); nothing here imports the web framework.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..store import Hit, StoreUnavailable
from .jobs import Job, JobRecord, Overloaded
from .log import REQUEST_ID, log


@dataclass(frozen=True)
class Reply:
    status: int
    body: str  # JSON text
    headers: dict[str, str] = field(default_factory=dict)


def json_reply(status: int, data: dict[str, Any], headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, json.dumps(data), headers or {})


def solve_json(key: str, cached: bool, hit: Hit, problem_json: str) -> str:
    """``{"key", "cached", "schedule", "warnings"}`` with the caller's own problem inside the schedule."""
    return (f'{{"key":"{key}","cached":{"true" if cached else "false"},"schedule":{hit.schedule_json(problem_json)},'
            f'"warnings":{hit.warnings_json}}}')


#: Header of an answer the store could not keep (the body's ``warnings`` says the same).
WARNING_HEADER = "X-Pipesched-Warning"


def warning_header(not_stored: str | None) -> dict[str, str]:
    return {WARNING_HEADER: not_stored} if not_stored else {}


def solve_reply(key: str, cached: bool, hit: Hit, problem_json: str) -> Reply:
    return Reply(200, solve_json(key, cached, hit, problem_json), warning_header(hit.not_stored))


def unavailable_reply(e: StoreUnavailable) -> Reply:
    """503 where nothing was computed: the store and the reason in words, when to retry. The
    library's text goes to the log under the request id, never into the body."""
    rid = REQUEST_ID.get()
    log.warning("request %s: %s (%s)", rid, e, e.detail)
    return json_reply(503, {
        "detail": f"{e}; nothing was computed for this request: retry in {e.retry_after_s} s",
        "store": e.store, "reason": e.reason, "request_id": rid}, {"Retry-After": str(e.retry_after_s)})


def entry_reply(hit: Hit) -> Reply:
    e = hit.entry
    head = {
        "key": e.key, "method": e.method, "status": e.status, "objective_value": e.objective_value,
        "lower_bound": e.lower_bound, "budget_s": e.budget_s, "solve_time_s": e.solve_time_s,
        "created_at": e.created_at, "updated_at": e.updated_at,
    }
    return Reply(200, json.dumps(head, separators=(",", ":"))[:-1] + f',"schedule":{e.schedule_json}}}')


def job_head(job: Any) -> str:
    """The fields every job report starts with (a solve's or a plan's), as JSON without its closing brace."""
    head = {"job": job.id, "key": job.key, "method": job.method, "state": job.state, "error": job.error,
            "created_at": job.created_at, "finished_at": job.finished_at}
    return json.dumps(head, separators=(",", ":"))[:-1]


def job_json(job: Job) -> str:
    if job.state == "done" and job.hit is not None:
        return job_head(job) + f',"result":{solve_json(job.key, False, job.hit, job.problem_json)}}}'
    return job_head(job) + ',"result":null}'


def pending_reply(job: Any) -> Reply:
    """202: not done within ``wait_s``; the job to poll."""
    return json_reply(202, {"job": job.id, "key": job.key, "state": job.state},
                      {"Location": f"/v1/jobs/{job.id}"})


def overloaded_reply(e: Overloaded) -> Reply:
    """429: every solver process busy and the queue full; ``Retry-After`` says when to ask again."""
    return json_reply(429, {"detail": str(e), "cap": e.cap, "limit": e.limit}, {"Retry-After": "1"})


async def job_reply(submit: Callable[[], JobRecord], wait_s: float,
                    answer: Callable[[Any], Reply | None]) -> Reply:
    """Start (or join) a job and wait up to ``wait_s``: ``answer(job)`` once done, 202 with the job
    after the wait, 429 when the queue is full, the failure's reply when it ended without one."""
    try:
        job = submit()
    except Overloaded as e:
        return overloaded_reply(e)
    try:
        await asyncio.wait_for(asyncio.shield(job.done.wait()), wait_s)
    except TimeoutError:
        return pending_reply(job)
    return answer(job) or failed_reply(job)


def validation_reply(errors: Sequence[Any], prefix: tuple[str, ...] = ()) -> Reply:
    """422 with every error as ``{loc, msg, type}`` and one readable line naming the fields."""
    detail = []
    for e in errors:
        msg = str(e.get("msg", "")).removeprefix("Value error, ")
        loc = [*prefix, *(x if isinstance(x, int) else str(x) for x in e.get("loc", ()))]
        detail.append({"loc": loc, "msg": msg, "type": str(e.get("type", "value_error"))})
    return refusal_reply(detail)


def refusal_reply(detail: list[dict[str, Any]]) -> Reply:
    """422 from error items ``{loc, msg, type, ...}``: the items and one line a person can read."""
    line = "; ".join(f"{'.'.join(str(x) for x in d['loc'][1:]) or 'body'}: {d['msg']}" for d in detail)
    return json_reply(422, {"detail": detail, "error": line})


def failed_reply(job: Any) -> Reply:
    """A solve or plan that ended without an answer: 422 when the method does not apply, else 504/500."""
    if job.outcome == "not_applicable":
        field, _, rest = (job.error or "").partition(": ")
        loc, msg = (["body", field], rest) if field == "model" else (["body", "method"], job.error or "")
        return refusal_reply([{"loc": loc, "msg": msg, "type": "not_applicable"}])
    status = 504 if job.outcome == "killed" else 500
    rid = REQUEST_ID.get()
    if status == 500:  # a solver bug or a crashed process: the log line the request id points to
        log.error("request %s: job %s (key %s, method %s) failed: %s", rid, job.id, job.key, job.method, job.error)
    return json_reply(status, {"detail": job.error or "the solve failed", "job": job.id, "key": job.key,
                               "state": job.state, "request_id": rid})

"""Plan jobs: one per distinct (plan key, method) in flight, each in its own killable process, and
the plan cache (a table of its own, ``{prefix}plan_entries``, with the schedule cache's rules).

A plan is served from the cache when it is final (``optimal`` or ``infeasible``) or was given at
least the ``time_limit_s`` asked for; otherwise the request plans again with the larger budget and
the store keeps whichever plan is better (least step time per microbatch, the planner's own
criterion). Identical requests arriving while a plan runs join it. Plans run in this replica's own
solver processes (also with ``--workers external``), at most ``max_concurrent_solves`` at once beside
the solves, with ``max_queued_solves`` more waiting.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from dataclasses import dataclass

from ..settings import Settings
from ..solving.plan_worker import run_plan
from ..solving.runner import ProcessRunner
from ..store import Entry, Store, StoreUnavailable
from .jobs import JobBook, JobRecord
from .log import REQUEST_ID, log
from .plan_accept import AcceptedPlan
from .replies import Reply, job_head, job_reply, warning_header

#: The plan cache's table is ``{table_prefix}plan_entries``.
TABLE_PREFIX = "plan_"


@dataclass
class PlanJob(JobRecord):
    entry: Entry | None = None  # the stored plan once done
    not_stored: str | None = None  # why the plan is the answer but not in the store


def plan_response_json(key: str, cached: bool, entry: Entry, not_stored: str | None = None) -> str:
    """``{"key", "cached", "plan", "warnings"}`` around the stored plan text (never re-serialised)."""
    return (f'{{"key":"{key}","cached":{"true" if cached else "false"},"plan":{entry.schedule_json},'
            f'"warnings":{json.dumps([not_stored] if not_stored else [])}}}')


def plan_reply(key: str, cached: bool, entry: Entry, not_stored: str | None = None) -> Reply:
    return Reply(200, plan_response_json(key, cached, entry, not_stored), warning_header(not_stored))


def plan_job_json(job: PlanJob) -> str:
    """``GET /v1/jobs/{job}`` for a plan: the solve job's fields, ``result`` as POST /v1/plan gives it."""
    if job.state == "done" and job.entry is not None:
        return job_head(job) + f',"result":{plan_response_json(job.key, False, job.entry, job.not_stored)}}}'
    return job_head(job) + ',"result":null}'


class PlanJobs:
    """The plan store and the plan jobs (their own :class:`JobBook`, the same caps as the solves')."""

    def __init__(self, settings: Settings, runner: ProcessRunner) -> None:
        self.settings = settings
        self.runner = runner
        self._store_: Store | None = None  # made on the first plan: a service that never plans has no table
        self._store_lock = threading.Lock()  # the store is first asked for from worker threads
        self.book: JobBook[PlanJob] = JobBook(settings)

    @property
    def store(self) -> Store:
        with self._store_lock:
            if self._store_ is None:
                self._store_ = Store(self.settings.db, self.settings.table_prefix + TABLE_PREFIX)
            return self._store_

    def get(self, job_id: str) -> PlanJob | None:
        return self.book.get(job_id)

    def cached(self, key: str, method: str) -> Entry | None:
        return self.store.get(key, method)

    def submit(self, req: AcceptedPlan) -> PlanJob:
        """The job planning (key, method): an existing one or a new one."""
        running = self.book.running(req.key, req.method)
        if running is not None:
            return running
        job = PlanJob(id=uuid.uuid4().hex, key=req.key, method=req.method, time_limit_s=req.time_limit_s)
        return self.book.start(job, lambda j: self._run(j, req))

    async def _run(self, job: PlanJob, req: AcceptedPlan) -> None:
        async with self.book.slots:
            job.state = "running"
            args = (req.model_json, req.cluster_json, req.method, req.time_limit_s, req.module_names)
            outcome, payload = await asyncio.to_thread(self.runner.call, run_plan, args, req.time_limit_s)
        job.outcome = outcome
        if outcome != "ok":
            job.error, job.state = payload, "failed"
            return
        data = json.loads(payload)
        m, step, bound = data.get("microbatches"), data.get("step_time"), data.get("lower_bound")
        per_mb = (lambda x: None if x is None or not m else x / m)  # noqa: E731 (the planner's criterion)
        entry = Entry(key=job.key, method=job.method, status=data["status"], objective_value=per_mb(step),
                      lower_bound=per_mb(bound), budget_s=job.time_limit_s,
                      solve_time_s=float(data.get("solve_time_s") or 0.0), schedule_json=payload,
                      created_at=time.time(), updated_at=time.time())
        try:
            job.entry = await asyncio.to_thread(self.store.put, **entry.values())
        except StoreUnavailable as e:  # the plan is still the answer: keep it, warn that it was not stored
            log.warning("request %s: a plan for key %s was not stored: %s (%s)", REQUEST_ID.get(), job.key, e, e.detail)
            job.entry, job.not_stored = entry, f"not stored in the cache: {e}; the plan is complete"
        job.state = "done"

    async def close(self) -> None:
        await self.book.close()
        if self._store_ is not None:
            self._store_.close()


async def plan(plans: PlanJobs, accepted: AcceptedPlan) -> Reply:
    """Answer from the plan cache, or plan (joining an identical plan in flight) and wait up to ``wait_s``."""
    hit = await asyncio.to_thread(plans.cached, accepted.key, accepted.method)
    if hit is not None and hit.satisfies(accepted.time_limit_s):
        return plan_reply(accepted.key, True, hit)

    def answer(job: PlanJob) -> Reply | None:
        return plan_reply(job.key, False, job.entry, job.not_stored) if job.entry is not None else None

    return await job_reply(lambda: plans.submit(accepted), accepted.wait_s, answer)

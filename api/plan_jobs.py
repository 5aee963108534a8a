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
from collections import OrderedDict
from dataclasses import dataclass, field

from .plan_accept import AcceptedPlan
from .settings import Settings
from .solving.jobs import JobState, Overloaded
from .solving.plan_worker import run_plan
from .solving.runner import Outcome, ProcessRunner
from .store import Entry, Store

#: The plan cache's table is ``{table_prefix}plan_entries``.
TABLE_PREFIX = "plan_"


@dataclass
class PlanJob:
    id: str
    key: str
    method: str
    time_limit_s: float
    state: JobState = "queued"
    created_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    outcome: Outcome | None = None
    error: str | None = None
    entry: Entry | None = None  # the stored plan once done
    done: asyncio.Event = field(default_factory=asyncio.Event)


def plan_response_json(key: str, cached: bool, entry: Entry) -> str:
    """``{"key", "cached", "plan"}`` around the stored plan text (never re-serialised)."""
    return f'{{"key":"{key}","cached":{"true" if cached else "false"},"plan":{entry.schedule_json}}}'


def plan_job_json(job: PlanJob) -> str:
    """``GET /v1/jobs/{job}`` for a plan: the solve job's fields, ``result`` as POST /v1/plan gives it."""
    head = {"job": job.id, "key": job.key, "method": job.method, "state": job.state, "error": job.error,
            "created_at": job.created_at, "finished_at": job.finished_at}
    text = json.dumps(head, separators=(",", ":"))[:-1]
    if job.state == "done" and job.entry is not None:
        return text + f',"result":{plan_response_json(job.key, False, job.entry)}}}'
    return text + ',"result":null}'


class PlanJobs:
    """The plan store, the in-flight table, the finished-job history and the caps."""

    def __init__(self, settings: Settings, runner: ProcessRunner) -> None:
        self.settings = settings
        self.runner = runner
        self._store_: Store | None = None  # made on the first plan: a service that never plans has no table
        self._store_lock = threading.Lock()  # the store is first asked for from worker threads
        self._slots = asyncio.Semaphore(settings.max_concurrent_solves)
        self._inflight: dict[tuple[str, str], PlanJob] = {}
        self._jobs: OrderedDict[str, PlanJob] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def store(self) -> Store:
        with self._store_lock:
            if self._store_ is None:
                self._store_ = Store(self.settings.db, self.settings.table_prefix + TABLE_PREFIX)
            return self._store_

    def get(self, job_id: str) -> PlanJob | None:
        return self._jobs.get(job_id)

    def cached(self, key: str, method: str) -> Entry | None:
        return self.store.get(key, method)

    def submit(self, req: AcceptedPlan) -> PlanJob:
        """The job planning (key, method): an existing one or a new one."""
        running = self._inflight.get((req.key, req.method))
        if running is not None:
            return running
        if len(self._inflight) >= self.settings.max_concurrent_solves + self.settings.max_queued_solves:
            raise Overloaded("max_queued_solves", self.settings.max_queued_solves)
        job = PlanJob(id=uuid.uuid4().hex, key=req.key, method=req.method, time_limit_s=req.time_limit_s)
        self._inflight[(req.key, req.method)] = job
        self._jobs[job.id] = job
        task = asyncio.create_task(self._run(job, req))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return job

    async def _run(self, job: PlanJob, req: AcceptedPlan) -> None:
        try:
            async with self._slots:
                job.state = "running"
                args = (req.model_json, req.cluster_json, req.method, req.time_limit_s, req.module_names)
                outcome, payload = await asyncio.to_thread(self.runner.call, run_plan, args, req.time_limit_s)
            job.outcome = outcome
            if outcome == "ok":
                job.entry = await asyncio.to_thread(self._store, job, payload)
                job.state = "done"
            else:
                job.error, job.state = payload, "failed"
        except Exception as e:  # the store is down or similar: fail this job, keep serving
            job.outcome, job.error, job.state = "error", f"{type(e).__name__}: {e}", "failed"
        finally:
            if job.state == "queued":
                job.state, job.error = "failed", "the service shut down before the plan started"
            job.finished_at = time.time()
            self._inflight.pop((job.key, job.method), None)
            job.done.set()
            finished = [j for j in self._jobs.values() if j.finished_at is not None]
            for old in finished[: max(0, len(finished) - self.settings.finished_jobs_kept)]:
                self._jobs.pop(old.id, None)

    def _store(self, job: PlanJob, plan_json: str) -> Entry:
        data = json.loads(plan_json)
        m, step, bound = data.get("microbatches"), data.get("step_time"), data.get("lower_bound")
        per_mb = (lambda x: None if x is None or not m else x / m)  # noqa: E731 (the planner's criterion)
        return self.store.put(key=job.key, method=job.method, status=data["status"],
                              objective_value=per_mb(step), lower_bound=per_mb(bound), budget_s=job.time_limit_s,
                              solve_time_s=float(data.get("solve_time_s") or 0.0), schedule_json=plan_json)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._store_ is not None:
            self._store_.close()

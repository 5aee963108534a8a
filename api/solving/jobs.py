"""Solve jobs: one per distinct (problem key, method) in flight, each in its own killable process.

Identical requests that arrive while a solve runs join its job instead of starting another, so
fifty trainers asking for the same shape at start-up cost one solve. At most
``max_concurrent_solves`` processes run at once; up to ``max_queued_solves`` more wait, and
beyond that :class:`Overloaded` (HTTP 429) tells the caller which cap it hit.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Literal

from ..cache import Cache, Hit
from ..metrics import Metrics
from ..settings import Settings
from ..store import Entry
from .runner import Outcome, ProcessRunner

JobState = Literal["queued", "running", "done", "failed"]


class Overloaded(Exception):
    """Too many distinct solves at once; ``cap`` names the setting that refused the request."""

    def __init__(self, cap: str, limit: int) -> None:
        super().__init__(f"every solver process is busy and {cap} = {limit} more solves already wait; retry later")
        self.cap = cap
        self.limit = limit


@dataclass
class Job:
    id: str
    key: str
    method: str
    time_limit_s: float
    problem_json: str  # the problem as the first requester wrote it
    state: JobState = "queued"
    created_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    outcome: Outcome | None = None
    error: str | None = None
    hit: Hit | None = None  # the stored entry once done
    done: asyncio.Event = field(default_factory=asyncio.Event)


class JobManager:
    """Owns the in-flight table, the finished-job history and the concurrency caps."""

    def __init__(self, settings: Settings, cache: Cache, metrics: Metrics, runner: ProcessRunner) -> None:
        self.settings = settings
        self.cache = cache
        self.metrics = metrics
        self.runner = runner
        self._slots = asyncio.Semaphore(settings.max_concurrent_solves)
        self._inflight: dict[tuple[str, str], Job] = {}
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()

    def get(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    def submit(self, key: str, method: str, problem_json: str, time_limit_s: float,
               hint: Hit | None) -> tuple[Job, bool]:
        """The job solving (key, method): an existing one (``shared=True``) or a new one."""
        running = self._inflight.get((key, method))
        if running is not None:
            self.metrics.shared_solves += 1
            return running, True
        cap = self.settings.max_concurrent_solves + self.settings.max_queued_solves
        if len(self._inflight) >= cap:
            raise Overloaded("max_queued_solves", self.settings.max_queued_solves)
        job = Job(id=uuid.uuid4().hex, key=key, method=method, time_limit_s=time_limit_s, problem_json=problem_json)
        self._inflight[(key, method)] = job
        self._jobs[job.id] = job
        hint_json = hint.schedule_json(problem_json) if hint and hint.entry.objective_value is not None else None
        task = asyncio.create_task(self._run(job, problem_json, hint_json))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return job, False

    async def _run(self, job: Job, problem_json: str, hint_json: str | None) -> None:
        self.metrics.solves_queued += 1
        try:
            async with self._slots:
                self.metrics.solves_queued -= 1
                job.state = "running"
                self.metrics.solves_running += 1
                t0 = time.perf_counter()
                try:
                    outcome, payload = await asyncio.to_thread(
                        self.runner.run, problem_json, job.method, job.time_limit_s, hint_json
                    )
                finally:
                    self.metrics.solves_running -= 1
                self.metrics.observe_solve(outcome, time.perf_counter() - t0)
            job.outcome = outcome
            if outcome == "ok":
                entry = await asyncio.to_thread(self._store, job, payload)
                job.hit = self.cache.remember(entry)
                job.state = "done"
            else:
                job.error, job.state = payload, "failed"
        except Exception as e:  # the store is down or similar: fail this job, keep serving
            job.outcome, job.error, job.state = "error", f"{type(e).__name__}: {e}", "failed"
        finally:
            if job.state == "queued":  # cancelled while waiting for a slot
                self.metrics.solves_queued -= 1
                job.state, job.error = "failed", "the service shut down before the solve started"
            job.finished_at = time.time()
            self._inflight.pop((job.key, job.method), None)
            job.done.set()
            self._forget_old()

    def _store(self, job: Job, schedule_json: str) -> Entry:
        data = json.loads(schedule_json)
        entry = self.cache.store.put(
            key=job.key,
            method=job.method,
            status=data["status"],
            objective_value=data.get("objective_value"),
            lower_bound=data.get("lower_bound"),
            budget_s=job.time_limit_s,
            solve_time_s=float(data.get("solve_time_s") or 0.0),
            schedule_json=schedule_json,
        )
        return entry

    def _forget_old(self) -> None:
        finished = [j for j in self._jobs.values() if j.finished_at is not None]
        for j in finished[: max(0, len(finished) - self.settings.finished_jobs_kept)]:
            self._jobs.pop(j.id, None)

    async def close(self) -> None:
        self.runner.kill_all()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

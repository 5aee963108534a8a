"""Solve jobs: one per distinct (problem key, method) in flight, each in its own killable process.

Identical requests that arrive while a solve runs join its job instead of starting another, so
fifty trainers asking for the same shape at start-up cost one solve. At most
``max_concurrent_solves`` processes run at once; up to ``max_queued_solves`` more wait, and
beyond that :class:`Overloaded` (HTTP 429) tells the caller which cap it hit. :class:`JobBook`
(the in-flight table, the finished-job history, the cap) is shared with the plan jobs.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from ..settings import Settings
from ..solving.runner import Outcome, ProcessRunner
from ..store import Cache, Entry, Hit, StoreUnavailable
from .log import REQUEST_ID, log
from .metrics import Metrics

JobState = Literal["queued", "running", "done", "failed"]


class Overloaded(Exception):
    """Too many distinct solves at once; ``cap`` names the setting that refused the request."""

    def __init__(self, cap: str, limit: int) -> None:
        super().__init__(f"every solver process is busy and {cap} = {limit} more solves already wait; retry later")
        self.cap = cap
        self.limit = limit


@dataclass
class JobRecord:
    """What every job reports (``GET /v1/jobs/{job}``): a solve's or a plan's."""

    id: str
    key: str
    method: str
    time_limit_s: float
    state: JobState = "queued"
    created_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    outcome: Outcome | None = None
    error: str | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class Job(JobRecord):
    problem_json: str = ""  # the problem as the first requester wrote it
    hit: Hit | None = None  # the stored entry once done


J = TypeVar("J", bound=JobRecord)


class JobBook(Generic[J]):
    """The in-flight table (one job per (key, method)), the finished-job history and the queue cap."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.slots = asyncio.Semaphore(settings.max_concurrent_solves)
        self._inflight: dict[tuple[str, str], J] = {}
        self._jobs: OrderedDict[str, J] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()

    def get(self, job_id: str) -> J | None:
        return self._jobs.get(job_id)

    def running(self, key: str, method: str) -> J | None:
        return self._inflight.get((key, method))

    def start(self, job: J, work: Callable[[J], Coroutine[Any, Any, None]]) -> J:
        """Run ``work(job)`` as this (key, method)'s job; :class:`Overloaded` when the queue is full."""
        if len(self._inflight) >= self.settings.max_concurrent_solves + self.settings.max_queued_solves:
            raise Overloaded("max_queued_solves", self.settings.max_queued_solves)
        self._inflight[(job.key, job.method)] = job
        self._jobs[job.id] = job
        task = asyncio.create_task(self._run(job, work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return job

    async def _run(self, job: J, work: Callable[[J], Coroutine[Any, Any, None]]) -> None:
        try:
            await work(job)
        except Exception as e:  # the store is down or similar: fail this job, keep serving
            job.outcome, job.error, job.state = "error", f"{type(e).__name__}: {e}", "failed"
        finally:
            if job.state == "queued":  # cancelled while waiting for a slot
                job.state, job.error = "failed", "the service shut down before the job started"
            job.finished_at = time.time()
            self._inflight.pop((job.key, job.method), None)
            job.done.set()
            finished = [j for j in self._jobs.values() if j.finished_at is not None]
            for old in finished[: max(0, len(finished) - self.settings.finished_jobs_kept)]:
                self._jobs.pop(old.id, None)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def keep(cache: Cache, entry: Entry) -> Hit:
    """Store a computed schedule and memoise what the store now holds; when the store refuses it, the
    schedule is still the answer (memoised, with a warning that it was not stored): never lost."""
    try:
        return cache.remember(await asyncio.to_thread(cache.store.put, **entry.values()))
    except StoreUnavailable as e:
        log.warning("request %s: a %s schedule for key %s was not stored: %s (%s)", REQUEST_ID.get(),
                    entry.method, entry.key, e, e.detail)
        return cache.remember_unstored(entry, e)


class JobManager:
    """Solve jobs in this replica's solver processes, their answers stored in the cache."""

    def __init__(self, settings: Settings, cache: Cache, metrics: Metrics, runner: ProcessRunner) -> None:
        self.settings = settings
        self.cache = cache
        self.metrics = metrics
        self.runner = runner
        self.book: JobBook[Job] = JobBook(settings)

    def get(self, job_id: str) -> Job | None:
        return self.book.get(job_id)

    def submit(self, key: str, method: str, problem_json: str, time_limit_s: float,
               hint: Hit | None) -> tuple[Job, bool]:
        """The job solving (key, method): an existing one (``shared=True``) or a new one."""
        running = self.book.running(key, method)
        if running is not None:
            self.metrics.shared_solves += 1
            return running, True
        hint_json = hint.schedule_json(problem_json) if hint and hint.entry.objective_value is not None else None
        job = Job(id=uuid.uuid4().hex, key=key, method=method, time_limit_s=time_limit_s, problem_json=problem_json)
        return self.book.start(job, lambda j: self._run(j, hint_json)), False

    async def _run(self, job: Job, hint_json: str | None) -> None:
        self.metrics.solves_queued += 1
        try:
            async with self.book.slots:
                self.metrics.solves_queued -= 1
                job.state = "running"
                self.metrics.solves_running += 1
                t0 = time.perf_counter()
                try:
                    outcome, payload = await asyncio.to_thread(
                        self.runner.run, job.problem_json, job.method, job.time_limit_s, hint_json)
                finally:
                    self.metrics.solves_running -= 1
                self.metrics.observe_solve(outcome, time.perf_counter() - t0)
        finally:
            if job.state == "queued":
                self.metrics.solves_queued -= 1
        job.outcome = outcome
        if outcome != "ok":
            job.error, job.state = payload, "failed"
            return
        data = json.loads(payload)
        entry = Entry(key=job.key, method=job.method, status=data["status"], objective_value=data.get("objective_value"),
                      lower_bound=data.get("lower_bound"), budget_s=job.time_limit_s,
                      solve_time_s=float(data.get("solve_time_s") or 0.0), schedule_json=payload,
                      created_at=time.time(), updated_at=time.time())
        job.hit = await keep(self.cache, entry)
        job.state = "done"

    async def close(self) -> None:
        self.runner.kill_all()
        await self.book.close()

"""The API replica's side of ``--workers external``: enqueue a solve, wait for it, report any job.

A replica keeps nothing in memory: the job is a queue row (pgqueuer) plus a record in the job
table, and the schedule lands in the shared cache, so any replica answers ``GET /v1/jobs/{id}``
and a replica that dies while a request waits loses nothing (the worker finishes the job; the
client's retry is a cache hit).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import psycopg

from ..services.accept import Accepted
from ..services.jobs import Job
from ..services.replies import Reply, failed_reply, job_json, json_reply, pending_reply, solve_reply
from ..settings import Settings, mask_url
from ..store import Cache, Hit, Store, StoreUnavailable
from .jobtable import JobTable
from .queue import PRIORITY_BATCH, PRIORITY_INTERACTIVE, JobQueue, dedupe_key
from .wakeups import Listener, done_channel, wait_woken

#: A waiting request is woken by the worker's notification; this re-check is only the safety net
#: for a notification lost while the listening connection was down.
SAFETY_RECHECK_S = 2.0
#: How long a request's database call retries a lost connection before the request answers 503.
REQUEST_RETRY_S = 2.0


class ExternalJobs:
    """Solves run by ``pipesched worker`` processes on any host, through the shared PostgreSQL."""

    def __init__(self, settings: Settings, store: Store, cache: Cache) -> None:
        if store.dialect != "postgresql":
            raise ValueError(f"--workers external needs a postgresql:// store (got {mask_url(settings.db)!r})")
        self.store, self.cache = store, cache
        # A request finds out in seconds that PostgreSQL is away (503 + Retry-After); the worker waits it out.
        self.queue = JobQueue(settings.db, settings.table_prefix, retry_for_s=REQUEST_RETRY_S)
        self.table = JobTable(store.engine, settings.table_prefix, retry_for_s=REQUEST_RETRY_S)
        self.done = done_channel(settings.table_prefix)
        self.listener = Listener(self.queue.url, [self.done])
        self.retention_s = settings.job_retention_s

    async def start(self) -> None:
        await self.queue.install()
        await self.listener.start()

    async def close(self) -> None:
        await self.listener.close()
        await self.queue.close()

    async def solve(self, accepted: Accepted, hint: Hit | None, priority: str | None) -> Reply:
        """Enqueue (or join) the solve and wait up to ``wait_s``; 202 with the job id after that."""
        hint_json = hint.schedule_json(accepted.problem_json) if hint and hint.entry.objective_value is not None else None
        payload = json.dumps({"key": accepted.key, "method": accepted.method, "budget_s": accepted.time_limit_s,
                              "problem": accepted.problem_json, "hint": hint_json}).encode()
        level = PRIORITY_BATCH if (priority or "").lower() == "batch" else PRIORITY_INTERACTIVE
        try:
            job_id = await self.queue.enqueue(payload, level, dedupe_key(accepted.key, accepted.method,
                                                                         accepted.time_limit_s))
        except (psycopg.OperationalError, psycopg.InterfaceError) as e:
            raise StoreUnavailable("postgresql", "cannot reach the database server", 2, f"{type(e).__name__}: {e}") from e
        await asyncio.to_thread(self.table.record, job_id, accepted.key, accepted.method,
                                accepted.time_limit_s, accepted.problem_json)
        row = await self._wait(job_id, accepted.wait_s)
        if row is None:  # finished and pruned already (retention): the schedule is in the cache
            entry = await asyncio.to_thread(self.store.get, accepted.key, accepted.method)
            if entry is not None:
                return solve_reply(accepted.key, False, self.cache.remember(entry), accepted.problem_json)
        if row is None or row.state not in ("done", "failed"):
            state = row.state if row is not None else "queued"
            return pending_reply(Job(id=job_id, key=accepted.key, method=accepted.method,
                                     time_limit_s=accepted.time_limit_s, state=state))
        job = await asyncio.to_thread(self._job, row)
        if job.state == "done" and job.hit is not None:
            return solve_reply(accepted.key, False, job.hit, accepted.problem_json)
        return failed_reply(job)

    async def job_reply(self, job_id: str) -> Reply:
        """``GET /v1/jobs/{id}`` from the shared tables, whichever replica enqueued the job."""
        row = await asyncio.to_thread(self.table.get, job_id)
        if row is None:
            return json_reply(404, {"detail": f"no job {job_id!r}: unknown, or finished more than "
                                    f"{self.retention_s:g} s ago (job_retention_s); a finished job's schedule "
                                    "stays in the cache: POST the problem again"})
        return Reply(200, job_json(await asyncio.to_thread(self._job, row)))

    async def _wait(self, job_id: str, wait_s: float) -> Any | None:
        """The job's row once finished (or at the deadline), read again only when its worker says so."""
        deadline = time.monotonic() + wait_s
        with self.listener.watch(self.done, job_id) as finished:
            while True:
                finished.clear()  # before the read: a notification after it still wakes us
                row = await asyncio.to_thread(self.table.get, job_id)
                left = deadline - time.monotonic()
                if row is None or row.state in ("done", "failed") or left <= 0:
                    return row
                await wait_woken(finished, min(SAFETY_RECHECK_S, left))

    def _job(self, row: Any) -> Job:
        """The job record in the shape the local job manager uses, so the bodies are shared."""
        hit = None
        if row.state == "done":
            entry = self.store.get(row.key, row.method)
            hit = self.cache.remember(entry) if entry is not None else None
        return Job(id=row.id, key=row.key, method=row.method, time_limit_s=row.budget_s, problem_json=row.problem,
                   state=row.state, created_at=row.created_at, finished_at=row.finished_at,
                   outcome=row.outcome, error=row.error, hit=hit)

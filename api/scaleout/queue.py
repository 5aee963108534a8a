"""The durable queue: pgqueuer's job table in the cache's PostgreSQL, behind a reconnecting handle.

pgqueuer does the queueing (why pgqueuer: docs/scale-out.md): ``enqueue`` with a ``dedupe_key``
and ``on_conflict="update_priority"`` returns the id of an identical job already queued or running
(and raises its priority, never lowers it), so replicas share one solve; ``dequeue`` claims the
highest-priority job with ``FOR UPDATE SKIP LOCKED`` and re-claims a running job whose heartbeat
stopped (its worker died); ``log_jobs`` moves a finished job out of the queue.

Every call goes through :meth:`JobQueue._call`, which reconnects once the connection is gone
(PostgreSQL restarted, or the backend terminated) and retries, so neither a replica nor a worker
needs restarting after the database comes back.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

import psycopg
from pgqueuer.adapters.drivers.psycopg import PsycopgDriver
from pgqueuer.adapters.persistence.qb import QueryBuilderEnvironment, QueryQueueBuilder
from pgqueuer.adapters.persistence.queries import Queries
from pgqueuer.domain.models import Job
from pgqueuer.domain.settings import DBSettings
from pgqueuer.ports.repository import EntrypointExecutionParameter
from sqlalchemy.engine import make_url

log = logging.getLogger("pipesched.scaleout")
T = TypeVar("T")

#: The one entrypoint: a solve of (problem, method, budget).
SOLVE = "solve"
#: Interactive requests (a trainer waiting) are dequeued before batch submissions.
PRIORITY_INTERACTIVE = 10
PRIORITY_BATCH = 0
#: Advisory-lock id that serialises schema installation across replicas and workers starting at once.
_INSTALL_LOCK = 0x70697065  # "pipe"


def libpq_url(url: str) -> str:
    """A SQLAlchemy URL (``postgresql+psycopg://``) as the plain ``postgresql://`` libpq reads."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def dedupe_key(key: str, method: str, budget_s: float) -> str:
    """Identical requests share a job: same canonical problem, method and time budget."""
    return f"{key}:{method}:{budget_s:g}"


class JobQueue:
    """One autocommit connection with pgqueuer's queries; reconnects when the server drops it."""

    def __init__(self, url: str, table_prefix: str = "", retry_for_s: float = 60.0) -> None:
        self.url = libpq_url(url)
        self.settings = DBSettings(prefix=table_prefix)
        self.retry_for_s = retry_for_s
        self.manager_id = uuid.uuid4()
        self._conn: psycopg.AsyncConnection | None = None
        self._queries: Queries | None = None
        self._lock = asyncio.Lock()

    async def _connect(self) -> Queries:
        if self._conn is not None and not self._conn.closed and self._queries is not None:
            return self._queries
        self._conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True,
                                                           application_name="pipesched-queue")
        self._queries = Queries(PsycopgDriver(self._conn), qbe=QueryBuilderEnvironment(self.settings),
                                qbq=QueryQueueBuilder(self.settings))
        return self._queries

    async def _call(self, op: Callable[[Queries], Awaitable[T]]) -> T:
        """Run ``op``; on a lost connection reconnect (backing off up to ``retry_for_s``) and run it again."""
        delay, waited = 0.1, 0.0
        while True:
            try:
                async with self._lock:
                    return await op(await self._connect())
            except (psycopg.OperationalError, psycopg.InterfaceError) as e:
                if waited >= self.retry_for_s:
                    raise
                log.warning("queue connection lost (%s); reconnecting in %.1f s", str(e).strip(), delay)
                await self._drop()
                await asyncio.sleep(delay)
                waited += delay
                delay = min(delay * 2, 2.0)

    async def _drop(self) -> None:
        conn, self._conn, self._queries = self._conn, None, None
        if conn is not None:
            try:
                await conn.close()
            except Exception:  # already broken: nothing to close
                log.debug("closing a broken queue connection failed", exc_info=True)

    async def install(self) -> None:
        """Create pgqueuer's tables once; concurrent starters wait on an advisory lock."""
        async def op(q: Queries) -> None:
            await q.driver.execute("SELECT pg_advisory_lock($1)", _INSTALL_LOCK)
            try:
                if not await q.schema_is_installed():
                    await q.install()
            finally:
                await q.driver.execute("SELECT pg_advisory_unlock($1)", _INSTALL_LOCK)
        await self._call(op)

    async def uninstall(self) -> None:
        await self._call(lambda q: q.uninstall())

    async def enqueue(self, payload: bytes, priority: int, dedupe: str) -> str:
        """The id of the job solving ``dedupe``: a new one, or the one already queued or running."""
        ids = await self._call(lambda q: q.enqueue(SOLVE, payload, priority, dedupe_key=dedupe,
                                                   on_conflict="update_priority"))
        return str(ids[0])

    async def claim(self, heartbeat_timeout_s: float) -> Job | None:
        """The next job for this worker: highest priority first, or one whose worker stopped beating."""
        jobs = await self._call(lambda q: q.dequeue(
            batch_size=1, entrypoints={SOLVE: EntrypointExecutionParameter(concurrency_limit=0)},
            queue_manager_id=self.manager_id, global_concurrency_limit=None,
            heartbeat_timeout=timedelta(seconds=heartbeat_timeout_s)))
        return jobs[0] if jobs else None

    async def heartbeat(self, job_ids: list[int]) -> None:
        if job_ids:
            await self._call(lambda q: q.update_heartbeat(job_ids))  # type: ignore[arg-type]

    async def finish(self, job: Job, ok: bool) -> None:
        """Move the job out of the queue into pgqueuer's log (its result is in the cache and job table)."""
        await self._call(lambda q: q.log_jobs([(job, "successful" if ok else "exception", None)]))

    async def prune_log(self, retention_s: float) -> int:
        """Delete pgqueuer log rows older than ``retention_s`` (its own clear is all or nothing)."""
        async def op(q: Queries) -> int:
            rows = await q.driver.fetch(
                f"WITH gone AS (DELETE FROM {self.settings.queue_table_log} "  # noqa: S608 (our own table name)
                "WHERE created < NOW() - make_interval(secs => $1) RETURNING 1) SELECT count(*) AS n FROM gone",
                float(retention_s))
            return int(rows[0]["n"])
        return await self._call(op)

    @property
    def channel(self) -> str:
        """pgqueuer's channel: its trigger notifies on every change of the queue table."""
        return self.settings.channel

    async def notify(self, channel: str, payload: str) -> None:
        await self._call(lambda q: q.driver.notify(channel, payload))

    async def close(self) -> None:
        await self._drop()

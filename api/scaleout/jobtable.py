"""Job records every replica can read: state, attempts and the reason a job failed.

pgqueuer's queue row exists only while a job is queued or running; this table keeps what
``GET /v1/jobs/{id}`` reports for the life of the job and after it (the schedule itself goes to
the shared cache). The id is pgqueuer's job id, so a deduplicated request gets the id of the job
it joined. Rows are written by the replica that enqueues (insert if missing) and by the worker
that runs the job (attempts counted here: pgqueuer re-claims a job whose worker died without
counting an attempt).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import (
    Column,
    Engine,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    delete,
    select,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.exc import DBAPIError

from ..store.entries import create_tables
from ..store.errors import guarded

log = logging.getLogger("pipesched.scaleout")
T = TypeVar("T")


def retrying(fn: Callable[..., T], *args: Any, retry_for_s: float = 60.0) -> T:
    """Call ``fn``; while the database is unreachable (restarting) retry with backoff.

    The engine's ``pool_pre_ping`` replaces dead pooled connections on checkout; this covers a
    connection that dies mid-statement and a server that is still starting.
    """
    delay, waited = 0.1, 0.0
    while True:
        try:
            return fn(*args)
        except DBAPIError as e:
            if not (e.connection_invalidated or _is_disconnect(e)) or waited >= retry_for_s:
                raise
            log.warning("database connection lost (%s); retrying in %.1f s", str(e.orig).strip(), delay)
            time.sleep(delay)
            waited += delay
            delay = min(delay * 2, 2.0)


def _is_disconnect(e: DBAPIError) -> bool:
    import psycopg

    return isinstance(e.orig, psycopg.OperationalError | psycopg.InterfaceError)


class JobTable:
    """Table ``{prefix}jobs`` next to the cache's entries (PostgreSQL only: the scale-out mode)."""

    def __init__(self, engine: Engine, table_prefix: str = "", retry_for_s: float = 60.0) -> None:
        """``retry_for_s``: how long a call keeps retrying while the database is unreachable (a worker
        waits a restart out; a replica answering a request gives up in seconds: 503, Retry-After)."""
        self.engine = engine
        self.dialect = "postgresql"
        self.retry_for_s = retry_for_s
        self.metadata = MetaData()
        self.table = Table(
            f"{table_prefix}jobs",
            self.metadata,
            Column("id", String(32), primary_key=True),
            Column("key", String(64), nullable=False),
            Column("method", String(64), nullable=False),
            Column("budget_s", Float, nullable=False),
            Column("problem", Text, nullable=False),
            Column("state", String(16), nullable=False),
            Column("attempts", Integer, nullable=False),
            Column("outcome", String(16), nullable=True),
            Column("error", Text, nullable=True),
            Column("worker", String(128), nullable=True),
            Column("created_at", Float, nullable=False),
            Column("finished_at", Float, nullable=True),
        )
        retrying(create_tables, self.engine, self.metadata)

    @guarded
    def record(self, job_id: str, key: str, method: str, budget_s: float, problem_json: str) -> None:
        """The enqueuing replica's row: ``queued``, unless a worker has written it already."""
        row = _row(job_id, key, method, budget_s, problem_json, state="queued", attempts=0)
        stmt = postgresql.insert(self.table).values(**row).on_conflict_do_nothing(index_elements=["id"])
        self._retry(self._execute, stmt)

    @guarded
    def start(self, job_id: str, key: str, method: str, budget_s: float, problem_json: str, worker: str) -> int:
        """A worker begins an attempt: state ``running``; returns the attempt number (1 for the first)."""
        t = self.table
        row = _row(job_id, key, method, budget_s, problem_json, state="running", attempts=1) | {"worker": worker}
        stmt = (postgresql.insert(t).values(**row)
                .on_conflict_do_update(index_elements=["id"],
                                       set_={"state": "running", "attempts": t.c.attempts + 1, "worker": worker})
                .returning(t.c.attempts))
        return int(self._retry(self._scalar, stmt))

    @guarded
    def finish(self, job_id: str, state: str, outcome: str, error: str | None) -> None:
        """``done`` (the schedule is in the cache) or ``failed`` with the reason."""
        t = self.table
        stmt = (update(t).where(t.c.id == job_id)
                .values(state=state, outcome=outcome, error=error, finished_at=time.time()))
        self._retry(self._execute, stmt)

    @guarded
    def get(self, job_id: str) -> Any | None:
        t = self.table
        return self._retry(self._first, select(t).where(t.c.id == job_id))

    @guarded
    def prune(self, retention_s: float) -> int:
        """Delete finished (``done``/``failed``) records older than ``retention_s``; never a queued or
        running one. Returns how many went. The schedules stay in the cache."""
        t = self.table
        stmt = delete(t).where(t.c.state.in_(("done", "failed")), t.c.finished_at < time.time() - retention_s)
        return int(self._retry(self._rowcount, stmt))

    def _retry(self, fn: Callable[..., T], *args: Any) -> T:
        return retrying(fn, *args, retry_for_s=self.retry_for_s)

    def drop(self) -> None:
        self.metadata.drop_all(self.engine)

    def _execute(self, stmt: Any) -> None:
        with self.engine.begin() as c:
            c.execute(stmt)

    def _rowcount(self, stmt: Any) -> int:
        with self.engine.begin() as c:
            return c.execute(stmt).rowcount

    def _scalar(self, stmt: Any) -> Any:
        with self.engine.begin() as c:
            return c.execute(stmt).scalar_one()

    def _first(self, stmt: Any) -> Any | None:
        with self.engine.connect() as c:
            return c.execute(stmt).first()


def _row(job_id: str, key: str, method: str, budget_s: float, problem_json: str, *, state: str,
         attempts: int) -> dict[str, Any]:
    return {"id": job_id, "key": key, "method": method, "budget_s": budget_s, "problem": problem_json,
            "state": state, "attempts": attempts, "created_at": time.time()}

"""The schedule cache: one row per (problem key, requested method), through SQLAlchemy Core.

SQLite (the default, one file in WAL mode with ``synchronous=FULL``) and PostgreSQL (several
replicas sharing one cache) run the same statements. Every write is one transaction of
single-statement upserts, so a crash or ``kill -9`` at any moment leaves either the old row or
the new one, never half of one.

"Keep the best schedule known" is decided inside the database, not by read-then-write, so two
replicas improving the same entry cannot overwrite a better schedule with a worse one: the
``UPDATE`` only matches when the stored row is not final and the new objective is lower (or
equal and now proven optimal).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Column,
    Engine,
    Float,
    Index,
    MetaData,
    String,
    Table,
    Text,
    and_,
    case,
    create_engine,
    event,
    func,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url

from ..settings import mask_url
from .errors import StoreUnavailable, guarded

#: Statuses that no further solving can change: served from the cache always.
FINAL_STATUSES = ("optimal", "infeasible")

#: PostgreSQL: seconds to wait for a connection to open, and for a free pooled connection.
CONNECT_TIMEOUT_S = 2
POOL_TIMEOUT_S = 2.0

#: Relative tolerance when comparing objectives (times are rounded to 1e-9 by the solver).
_REL_TOL = 1e-9


@dataclass(frozen=True)
class Entry:
    """A cached schedule: the best known for ``key`` asked with ``method``."""

    key: str
    method: str
    status: str
    objective_value: float | None
    lower_bound: float | None
    budget_s: float  # the largest time_limit_s a solve of this entry was given
    solve_time_s: float  # total solver time spent on this entry, over all improvements
    schedule_json: str  # the schedule exactly as the CLI writes it (compact JSON, no newline)
    created_at: float
    updated_at: float

    @property
    def final(self) -> bool:
        return self.status in FINAL_STATUSES

    def values(self) -> dict[str, Any]:
        """What :meth:`Store.put` takes to record this entry."""
        return {"key": self.key, "method": self.method, "status": self.status, "objective_value": self.objective_value,
                "lower_bound": self.lower_bound, "budget_s": self.budget_s, "solve_time_s": self.solve_time_s,
                "schedule_json": self.schedule_json}

    def satisfies(self, time_limit_s: float) -> bool:
        """Served as is: proven final, or already given at least this much time."""
        return self.final or self.budget_s >= time_limit_s


def normalise_url(url: str) -> str:
    """``postgresql://`` means psycopg 3 here (SQLAlchemy would otherwise pick psycopg2)."""
    u = make_url(url)
    if u.drivername == "postgresql":
        u = u.set(drivername="postgresql+psycopg")
    return u.render_as_string(hide_password=False)


class Store:
    """Entries in table ``{prefix}entries``; create it on first use."""

    def __init__(self, url: str, table_prefix: str = "") -> None:
        url = normalise_url(url)
        u = make_url(url)
        self.dialect = u.get_backend_name()
        self.sqlite_path: Path | None = None
        if self.dialect == "sqlite":
            if u.database and u.database != ":memory:":
                self.sqlite_path = Path(u.database).expanduser()
                self.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
            self.engine: Engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})
            event.listen(self.engine, "connect", _sqlite_pragmas)
        elif self.dialect == "postgresql":
            # Bounded waits: a request finds out in seconds that the server is away (503), instead of
            # hanging on a connection attempt or a free pooled connection.
            self.engine = create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10, pool_timeout=POOL_TIMEOUT_S,
                                        connect_args={"connect_timeout": CONNECT_TIMEOUT_S})
        else:
            raise ValueError(f"unsupported database URL {mask_url(url)!r}: use sqlite:///path or postgresql://user@host/db")
        self.metadata = MetaData()
        self.table = Table(
            f"{table_prefix}entries",
            self.metadata,
            Column("key", String(64), primary_key=True),
            Column("method", String(64), primary_key=True),
            Column("status", String(16), nullable=False),
            Column("objective_value", Float, nullable=True),
            Column("lower_bound", Float, nullable=True),
            Column("budget_s", Float, nullable=False),
            Column("solve_time_s", Float, nullable=False),
            Column("schedule", Text, nullable=False),
            Column("created_at", Float, nullable=False),
            Column("updated_at", Float, nullable=False),
            Index(f"{table_prefix}entries_key", "key"),
        )
        create_tables(self.engine, self.metadata)
        self.write_failure: StoreUnavailable | None = None  # the last write's outage, until one succeeds
        self.failed_bytes = 0  # the size of that write

    # ------------------------------------------------------------------ reads
    @guarded
    def get(self, key: str, method: str) -> Entry | None:
        t = self.table
        with self.engine.connect() as c:
            row = c.execute(select(t).where(t.c.key == key, t.c.method == method)).first()
        return _entry(row) if row else None

    @guarded
    def best(self, key: str) -> Entry | None:
        """The best entry of a problem over all methods: proven optimal first, then lowest objective."""
        t = self.table
        rank = case((t.c.status == "optimal", 0), (t.c.objective_value.is_not(None), 1), else_=2)
        q = (
            select(t)
            .where(t.c.key == key)
            .order_by(rank, t.c.objective_value, t.c.updated_at.desc())
            .limit(1)
        )
        with self.engine.connect() as c:
            row = c.execute(q).first()
        return _entry(row) if row else None

    @guarded
    def count(self) -> int:
        with self.engine.connect() as c:
            return int(c.execute(select(func.count()).select_from(self.table)).scalar_one())

    @guarded
    def ping(self) -> None:
        with self.engine.connect() as c:
            c.execute(text("SELECT 1"))

    def health(self) -> StoreUnavailable | None:
        """None when the store answers and its last write did not fail; otherwise why not.

        A write that failed for want of space keeps the store unhealthy until a write succeeds or,
        on SQLite, the file system has room for it again (a small probe write can pass on a full disk
        while a schedule cannot: SQLite reuses its write-ahead log's space)."""
        try:
            self.ping()
        except StoreUnavailable as e:
            return e
        failure = self.write_failure
        if failure is None:
            return None
        if failure.reason == "cannot reach the database server":  # it answers again
            self.write_failure = None
            return None
        if self.dialect == "sqlite" and self.sqlite_path is not None:
            free = os.statvfs(self.sqlite_path.parent)
            if free.f_bavail * free.f_frsize >= 4 * self.failed_bytes + 65536:
                self.write_failure = None
                return None
        return failure

    # ----------------------------------------------------------------- writes
    def put(
        self,
        *,
        key: str,
        method: str,
        status: str,
        objective_value: float | None,
        lower_bound: float | None,
        budget_s: float,
        solve_time_s: float,
        schedule_json: str,
    ) -> Entry:
        """Record a solve; the row keeps whichever schedule is better. Returns the row now stored.
        :class:`StoreUnavailable` when it cannot (remembered for ``/healthz`` until a write succeeds)."""
        try:
            entry = self._put(key=key, method=method, status=status, objective_value=objective_value,
                              lower_bound=lower_bound, budget_s=budget_s, solve_time_s=solve_time_s,
                              schedule_json=schedule_json)
        except StoreUnavailable as e:
            self.write_failure, self.failed_bytes = e, len(schedule_json)
            raise
        self.write_failure = None
        return entry

    @guarded
    def _put(self, *, key: str, method: str, status: str, objective_value: float | None,
             lower_bound: float | None, budget_s: float, solve_time_s: float, schedule_json: str) -> Entry:
        t = self.table
        now = time.time()
        values = {
            "key": key, "method": method, "status": status, "objective_value": objective_value,
            "lower_bound": lower_bound, "budget_s": budget_s, "solve_time_s": solve_time_s,
            "schedule": schedule_json, "created_at": now, "updated_at": now,
        }
        insert = (postgresql.insert if self.dialect == "postgresql" else sqlite.insert)(t)
        here = and_(t.c.key == key, t.c.method == method)
        with self.engine.begin() as c:
            fresh = insert.values(**values).on_conflict_do_nothing(index_elements=["key", "method"])
            if c.execute(fresh.returning(t.c.key)).first() is None:  # the row existed: improve it
                better = _better_than_stored(t, status, objective_value)
                if better is not None:
                    c.execute(
                        update(t)
                        .where(here, better)
                        .values(status=status, objective_value=objective_value, lower_bound=lower_bound,
                                schedule=schedule_json, updated_at=now)
                    )
                c.execute(
                    update(t)
                    .where(here)
                    .values(
                        budget_s=case((t.c.budget_s < budget_s, literal(budget_s)), else_=t.c.budget_s),
                        solve_time_s=t.c.solve_time_s + solve_time_s,
                    )
                )
            row = c.execute(select(t).where(here)).first()
        assert row is not None
        return _entry(row)

    def drop(self) -> None:
        """Remove the table (tests use a private prefix per run)."""
        self.metadata.drop_all(self.engine)

    def close(self) -> None:
        self.engine.dispose()


#: Advisory-lock id that serialises table creation across replicas and workers starting at once.
SCHEMA_LOCK = 0x70697066  # "pipf"


def create_tables(engine: Engine, metadata: MetaData) -> None:
    """Create the missing tables of ``metadata``. On PostgreSQL under a transaction-scoped advisory
    lock: ``CREATE TABLE`` of two starters at once is not atomic (the loser dies on ``DuplicateTable``
    or a ``pg_type`` unique violation), so replicas and workers starting together on an empty
    database take turns, and each later one finds the tables there."""
    if engine.dialect.name != "postgresql":
        metadata.create_all(engine)
        return
    with engine.begin() as c:
        c.execute(select(func.pg_advisory_xact_lock(SCHEMA_LOCK)))
        metadata.create_all(c)


def _better_than_stored(t: Table, status: str, objective: float | None):  # noqa: ANN202 (SQL expression)
    """SQL condition: the new result should replace the stored row."""
    not_final = t.c.status.not_in(FINAL_STATUSES)
    if objective is not None:
        tol = _REL_TOL * max(1.0, abs(objective))
        lower = t.c.objective_value > objective + tol
        ties_but_proven = and_(literal(status == "optimal"), t.c.objective_value >= objective - tol)
        return and_(not_final, or_(t.c.objective_value.is_(None), lower, ties_but_proven))
    if status == "infeasible":  # proven: replaces a timeout that found nothing
        return and_(not_final, t.c.objective_value.is_(None))
    return None  # a timeout with nothing found never replaces anything


def _entry(row) -> Entry:  # noqa: ANN001 (SQLAlchemy Row)
    return Entry(
        key=row.key, method=row.method, status=row.status, objective_value=row.objective_value,
        lower_bound=row.lower_bound, budget_s=row.budget_s, solve_time_s=row.solve_time_s,
        schedule_json=row.schedule, created_at=row.created_at, updated_at=row.updated_at,
    )


def _sqlite_pragmas(dbapi_connection, _record) -> None:  # noqa: ANN001
    """WAL lets readers run beside the writer; FULL syncs each commit, so kill -9 loses nothing committed."""
    cur = dbapi_connection.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()

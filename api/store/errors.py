"""A store that cannot answer, in words: :class:`StoreUnavailable` names the store and the reason
("the disk is full", "cannot reach the database server", ...) and says when to retry, so the service
can answer 503 with ``Retry-After`` (or keep a computed schedule and warn that it was not stored)
without quoting the library. The library's own text stays in :attr:`StoreUnavailable.detail` for
the log.

Only outages are translated: a missing table or a bad statement is a bug and stays an error.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from sqlalchemy import exc

T = TypeVar("T")

#: (words found in the library's message, the reason in our words, seconds to wait before retrying)
_OUTAGES: list[tuple[tuple[str, ...], str, int]] = [
    (("database or disk is full", "no space left", "disk full"), "the disk is full", 5),
    (("readonly database", "read-only", "read only"), "the database is read-only", 5),
    (("database is locked",), "the database is locked by another writer", 1),
    (("disk i/o error",), "the disk failed a read or a write", 5),
    (("connection refused", "could not connect", "connection failed", "server closed the connection",
      "terminating connection", "shutting down", "starting up", "connection is closed", "consuming input failed",
      "connection timeout", "timeout expired", "connection reset", "connection is lost", "no connection",
      "server conn crashed", "the connection is closed", "sending query failed"),
     "cannot reach the database server", 2),
]


class StoreUnavailable(Exception):
    """The store (``store``: ``sqlite`` or ``postgresql``) cannot serve this now, for ``reason``."""

    def __init__(self, store: str, reason: str, retry_after_s: int, detail: str) -> None:
        super().__init__(f"the store ({store}) is unavailable: {reason}")
        self.store, self.reason, self.retry_after_s, self.detail = store, reason, retry_after_s, detail


def outage(store: str, e: BaseException) -> StoreUnavailable | None:
    """``e`` as a :class:`StoreUnavailable` when it is an outage (disk full, server gone, pool
    exhausted, ...), None when it is something else (a bug: let it surface)."""
    detail = f"{type(e).__name__}: {e}"
    if isinstance(e, exc.TimeoutError):  # QueuePool: every connection busy past pool_timeout
        return StoreUnavailable(store, "every database connection is busy", 1, detail)
    if not isinstance(e, exc.DBAPIError | exc.InterfaceError):
        return None
    text = str(getattr(e, "orig", None) or e).lower()
    for words, reason, retry in _OUTAGES:
        if any(w in text for w in words):
            return StoreUnavailable(store, reason, retry, detail)
    if getattr(e, "connection_invalidated", False):
        return StoreUnavailable(store, "cannot reach the database server", 2, detail)
    return None


def guarded(method: Callable[..., T]) -> Callable[..., T]:
    """Decorate a store method: an outage raises :class:`StoreUnavailable` (from ``self.dialect``)."""
    @wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> T:
        try:
            return method(self, *args, **kwargs)
        except (exc.DBAPIError, exc.TimeoutError) as e:
            translated = outage(self.dialect, e)
            if translated is None:
                raise
            raise translated from e
    return call

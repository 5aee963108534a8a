"""``/healthz``: answered at once, and true.

The store's check runs on a thread of its own, so it never waits behind requests that hold the shared
thread pool (with PostgreSQL away, those each wait out a pool timeout), and the answer waits at most
``timeout_s`` for it; a check still running is joined, not started again. 503 while the store cannot
be read, or its last write failed (a full disk included) and it has no room again.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from ..store import Store, StoreUnavailable
from .replies import Reply, json_reply


class Health:
    def __init__(self, store: Store, timeout_s: float = 2.0) -> None:
        self.store, self.timeout_s = store, timeout_s
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="pipesched-health")
        self._check: asyncio.Future[StoreUnavailable | None] | None = None

    async def reply(self) -> Reply:
        if self._check is None or self._check.done():
            self._check = asyncio.get_running_loop().run_in_executor(self._thread, self.store.health)
        try:
            problem = await asyncio.wait_for(asyncio.shield(self._check), self.timeout_s)
        except TimeoutError:
            return self._unavailable(f"the store did not answer within {self.timeout_s:g} s", 2)
        if problem is not None:
            return self._unavailable(problem.reason, problem.retry_after_s)
        return json_reply(200, {"status": "ok", "store": self.store.dialect})

    def _unavailable(self, reason: str, retry_after_s: int) -> Reply:
        return json_reply(503, {"status": "unavailable", "store": self.store.dialect, "reason": reason},
                          {"Retry-After": str(retry_after_s)})

    def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)

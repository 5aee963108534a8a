"""The store behind a small in-process memo, so a cache hit costs no database round trip.

Final entries (proven optimal or infeasible) never change and stay memoised; others are
re-read after ``ttl_s`` so a replica sees improvements another replica wrote. The memo also
keeps each entry's schedule JSON split at the problem, so a response can splice in the problem
exactly as the client wrote it without re-serialising the schedule.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

from .store import Entry, Store

_PROBLEM_PREFIX = '{"problem":'
_AFTER_PROBLEM = ',"method":'  # first field after the problem; cannot occur inside a problem's JSON


@dataclass(frozen=True)
class Hit:
    entry: Entry
    tail: str  # the schedule JSON from ',"method":' on

    def schedule_json(self, problem_json: str) -> str:
        """The schedule with ``problem_json`` as its problem: ``Schedule(problem=p, ...)`` dumped."""
        return _PROBLEM_PREFIX + problem_json + self.tail


def split_schedule(schedule_json: str) -> str:
    if not schedule_json.startswith(_PROBLEM_PREFIX):
        raise ValueError("stored schedule JSON does not start with its problem")
    return schedule_json[schedule_json.index(_AFTER_PROBLEM):]


class Cache:
    def __init__(self, store: Store, size: int = 4096, ttl_s: float = 5.0) -> None:
        self.store = store
        self.size = size
        self.ttl_s = ttl_s
        self._memo: OrderedDict[tuple[str, str], tuple[Hit, float]] = OrderedDict()

    def get(self, key: str, method: str) -> Hit | None:
        now = time.monotonic()
        item = self._memo.get((key, method))
        if item is not None and item[1] > now:
            self._memo.move_to_end((key, method))
            return item[0]
        entry = self.store.get(key, method)
        return self.remember(entry) if entry else None

    def best(self, key: str) -> Hit | None:
        entry = self.store.best(key)
        return Hit(entry, split_schedule(entry.schedule_json)) if entry else None

    def remember(self, entry: Entry) -> Hit:
        hit = Hit(entry, split_schedule(entry.schedule_json))
        expires = float("inf") if entry.final else time.monotonic() + self.ttl_s
        self._memo[(entry.key, entry.method)] = (hit, expires)
        self._memo.move_to_end((entry.key, entry.method))
        while len(self._memo) > self.size:
            self._memo.popitem(last=False)
        return hit

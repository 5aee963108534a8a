"""The store behind a small in-process memo, so a cache hit costs no database round trip.

Final entries (proven optimal or infeasible) never change and stay memoised; others are
re-read after ``ttl_s`` so a replica sees improvements another replica wrote. ``peek`` and
``peek_optimal`` read the memo alone (no I/O: safe on the event loop, used by the cache-hit fast
path); ``get`` and ``best`` read the store on a memo miss (blocking: call them from a thread). The memo also
keeps each entry's schedule JSON split at the problem, so a response can splice in the problem
exactly as the client wrote it without re-serialising the schedule.
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections import OrderedDict
from dataclasses import dataclass

from pipesched.solver.core.problem import Problem

from .entries import Entry, Store
from .errors import StoreUnavailable

_PROBLEM_PREFIX = '{"problem":'
_AFTER_PROBLEM = ',"method":'  # first field after the problem; cannot occur inside a problem's JSON
_PEAKS = re.compile(r'"peak_memory":\[([^\]]*)\]')


@dataclass(frozen=True)
class Hit:
    entry: Entry
    tail: str  # the schedule JSON from ',"method":' on
    not_stored: str | None = None  # why this schedule is in memory only (the store refused the write)

    def schedule_json(self, problem_json: str) -> str:
        """The schedule with ``problem_json`` as its problem: ``Schedule(problem=p, ...)`` dumped."""
        return _PROBLEM_PREFIX + problem_json + self.tail

    @functools.cached_property
    def warnings_json(self) -> str:
        """``["..."]``: what the answer's reader should know (no limit, peak above 1F1B's), once per entry.

        Only the stored problem and the ``peak_memory`` list are read, not the whole schedule.
        """
        warnings = [self.not_stored] if self.not_stored else []
        stored = self.entry.schedule_json
        problem_text = stored[len(_PROBLEM_PREFIX):len(stored) - len(self.tail)]
        peaks = _PEAKS.search(self.tail) if '"limit":null' in problem_text else None
        if peaks is not None:
            problem = Problem.model_validate_json(problem_text)
            warning = problem.memory_warning(json.loads(f"[{peaks.group(1)}]"))
            warnings += [warning] if warning else []
        return json.dumps(warnings)


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
        self._optimal: OrderedDict[str, Hit] = OrderedDict()  # a proven-optimal entry per key, any method

    def peek(self, key: str, method: str) -> Hit | None:
        """The memoised entry while it is fresh; None otherwise (no I/O)."""
        item = self._memo.get((key, method))
        if item is None or item[1] <= time.monotonic():
            return None
        self._memo.move_to_end((key, method))
        return item[0]

    def peek_optimal(self, key: str) -> Hit | None:
        """A proven-optimal entry of ``key`` from any method, if one was seen (no I/O). Optimal is
        final, so it never goes stale: it is what :meth:`best` would rank first."""
        return self._optimal.get(key)

    def get(self, key: str, method: str) -> Hit | None:
        """The entry, from the memo while fresh, else from the store; while the store is unavailable, a
        stale memo entry is what is available (served), and without one :class:`StoreUnavailable` rises."""
        hit = self.peek(key, method)
        if hit is not None:
            return hit
        try:
            entry = self.store.get(key, method)
        except StoreUnavailable:
            stale = self._memo.get((key, method))
            if stale is None:
                raise
            return stale[0]
        return self.remember(entry) if entry else None

    def best(self, key: str) -> Hit | None:
        """The best entry over all methods (proven optimal first, then the lowest objective)."""
        optimal = self.peek_optimal(key)
        if optimal is not None:
            return optimal
        entry = self.store.best(key)
        return self.remember(entry) if entry else None

    def remember_unstored(self, entry: Entry, why: StoreUnavailable) -> Hit:
        """A schedule the store refused: kept in memory for ``ttl_s`` (then the store is asked again and,
        on a miss, the next request solves and tries to store it again), answered with a warning."""
        hit = Hit(entry, split_schedule(entry.schedule_json),
                  f"not stored in the cache: {why}; the schedule is complete, but a later request may solve again")
        self._memo[(entry.key, entry.method)] = (hit, time.monotonic() + self.ttl_s)
        return hit

    def remember(self, entry: Entry) -> Hit:
        hit = Hit(entry, split_schedule(entry.schedule_json))
        expires = float("inf") if entry.final else time.monotonic() + self.ttl_s
        self._memo[(entry.key, entry.method)] = (hit, expires)
        self._memo.move_to_end((entry.key, entry.method))
        while len(self._memo) > self.size:
            self._memo.popitem(last=False)
        if entry.status == "optimal":
            self._optimal[entry.key] = hit
            while len(self._optimal) > self.size:
                self._optimal.popitem(last=False)
        return hit

"""Solving a problem for a request: answer from the cache, or solve (sharing identical solves in flight).

Which cache entry answers a request (the key is the problem alone; the method picks a slot) is
decided by :func:`answer_from_cache`, the one rule the cache-hit fast path and the route share:

- method ``X`` other than ``auto`` is served from the entry solved with ``X`` (a user asking for
  ``1f1b`` wants the 1F1B schedule, not a better one);
- ``auto`` means "the best you can do": a proven-optimal schedule from any method answers it
  at once, and an ``auto`` solve is warm-started from the best schedule any method has found;
- an entry that is final (optimal or infeasible) or was given at least ``time_limit_s`` is
  served as is; otherwise the request solves again with the larger budget, warm-started from
  the entry, and the store keeps whichever schedule is better;
- a request that arrives while a solve of the same (key, method) runs joins that solve, whatever
  its own ``time_limit_s`` (it can ask again with the larger budget once the entry exists).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from ..store import Cache, Hit
from .accept import Accepted
from .jobs import Job
from .replies import Reply, job_reply, solve_reply
from .state import Service


@dataclass(frozen=True)
class Verdict:
    """What the cache says about a request: the entry that answers it (or None: solve), and the best
    schedule known to warm-start that solve from."""

    answer: Hit | None
    hint: Hit | None


def answer_from_cache(accepted: Accepted, get: Callable[[str, str], Hit | None],
                      best: Callable[[str], Hit | None]) -> Verdict:
    """The rule above, over ``get(key, method)`` and ``best(key)`` (the best entry over all methods,
    or at least any proven-optimal one). The fast path passes the memo's lookups, the route the
    store's: one rule, so whichever answers a hit, the answer is the same."""
    hit = get(accepted.key, accepted.method)
    if hit is not None and hit.entry.satisfies(accepted.time_limit_s):
        return Verdict(hit, hit)
    if accepted.method != "auto":
        return Verdict(None, hit)
    top = best(accepted.key)
    if top is not None and top.entry.status == "optimal":
        return Verdict(top, top)
    better = top is not None and top.entry.objective_value is not None and (
        hit is None or hit.entry.objective_value is None or top.entry.objective_value < hit.entry.objective_value)
    return Verdict(None, top if better else hit)


def memo_answer(cache: Cache, accepted: Accepted) -> Hit | None:
    """The answer from memory alone (no I/O: the event loop's fast path), or None to ask the route."""
    return answer_from_cache(accepted, cache.peek, cache.peek_optimal).answer


async def solve(svc: Service, accepted: Accepted, priority: str | None) -> Reply:
    """Answer from the cache or solve, waiting up to ``wait_s`` (202 with a job after that)."""
    verdict = await asyncio.to_thread(answer_from_cache, accepted, svc.cache.get, svc.cache.best)
    if verdict.answer is not None:
        svc.metrics.cache_hits += 1
        return solve_reply(accepted.key, True, verdict.answer, accepted.problem_json)
    svc.metrics.cache_misses += 1
    if svc.external is not None:  # --workers external: the shared queue, any replica, any worker
        return await svc.external.solve(accepted, verdict.hint, priority)

    def submit() -> Job:
        return svc.jobs.submit(accepted.key, accepted.method, accepted.problem_json, accepted.time_limit_s,
                               verdict.hint)[0]

    def answer(job: Job) -> Reply | None:
        return solve_reply(accepted.key, False, job.hit, accepted.problem_json) if job.hit is not None else None

    return await job_reply(submit, accepted.wait_s, answer)

"""``pipesched batch --engine ray``: a sweep's problems and plans in chunks on a Ray cluster (``pipesched[ray]``).

Why chunks: a Ray task has a fixed cost (scheduling, a round trip to the driver: milliseconds on a
busy host), which a sweep of tiny problems, each solved in milliseconds, would pay hundreds of
times. So a task answers a chunk of items, in one process forked from its Ray worker's warm
forkserver, each item under its own hard deadline (:class:`~pipesched.api.batch.chunks.ChunkRunner`).
The chunk's size follows the items' measured solve times (:class:`ChunkSizer`): a task lasts about
:data:`TASK_SECONDS`, long solves go one a task, and chunks shrink near the end so every CPU stays
busy to the last item. At most two tasks per CPU are in flight, so a worker always has its next
chunk queued while answers stream back to the driver (:mod:`pipesched.api.batch.run`), which writes
OUTDIR, the resume log, the progress bar and the summary exactly as for the local engine.

Ray reuses its worker processes, so the solver modules and the forkserver are set up once per
worker. Node loss: a task whose node dies is re-run elsewhere by Ray (``max_retries``, system
failures only: a solver error is an answer, not a reason to retry), so a lost node re-runs only its
chunks, and the driver writes each item once, from the one answer it receives.

Importing this module registers the engine (``ENGINES["ray"]``); Ray itself is imported only when
the engine is made. The cluster address is ``RAY_ADDRESS`` (``--address`` sets it); without one,
Ray starts a local cluster on this machine.
"""

from __future__ import annotations

import os
import statistics
import threading
from collections import deque
from collections.abc import Iterator
from functools import cache
from typing import Any

from ..models import PlanRequest
from .chunks import Result, Unit
from .engines import ENGINES, Answer, Engine, EngineConfig, StopBatch, Work, answer_of

#: Ray re-runs a task this many times when its node or worker process dies.
TASK_RETRIES = 3
#: How long a task should last (s): long enough that Ray's per-task cost is ~1% of it, short
#: enough that a lost node re-runs little and answers stream back steadily.
TASK_SECONDS = 0.5
#: Items in a task at most, and in the first tasks (before any solve time is known).
MAX_CHUNK, FIRST_CHUNK = 64, 2
#: Tasks in flight per CPU: the next chunk is already waiting when a worker finishes one.
TASKS_PER_CPU = 2


def _solve_chunk(units: list[Unit], time_limits: list[float], kill_grace_s: float) -> list[Result]:
    """Body of the Ray task: one ``(outcome, payload, seconds)`` per unit; one runner per Ray worker."""
    return _runner(kill_grace_s).run(units, time_limits)


@cache
def _runner(kill_grace_s: float) -> Any:
    """The worker's runner. A Ray worker runs Ray's ``default_worker.py`` as ``__main__``, and
    multiprocessing re-imports the parent's main script in every child it starts (``spawn.prepare``),
    which here means importing Ray again in each solve process: ~1 s a solve, measured. The solve
    needs nothing from that script, so the worker's ``__main__`` forgets its file first."""
    import sys

    from .chunks import ChunkRunner

    main = sys.modules.get("__main__")
    if main is not None and getattr(main, "__spec__", None) is None:
        main.__dict__.pop("__file__", None)
    return ChunkRunner(kill_grace_s)


class ChunkSizer:
    """How many items the next task gets: about ``TASK_SECONDS`` of the median solve seen so far
    (``FIRST_CHUNK`` before any), at most ``MAX_CHUNK``, and at most an even share of what is left
    among the task slots, so the last chunks end together."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.seconds: list[float] = []

    def observe(self, seconds: float) -> None:
        self.seconds.append(seconds)

    def next(self, left: int) -> int:
        if self.seconds:
            by_time = int(TASK_SECONDS / max(statistics.median(self.seconds[-200:]), 1e-3))
        else:
            by_time = FIRST_CHUNK
        share = -(-left // self.slots)  # ceil
        return max(1, min(by_time, MAX_CHUNK, share, left))


def unit_of(work: Work, config: EngineConfig) -> Unit:
    """A sweep item as the chunk process's unit (the same arguments the local engine passes)."""
    if isinstance(work, PlanRequest):
        return "plan", (work.model.model_dump_json(), work.cluster.model_dump_json(), config.method,
                        config.time_limit_s, work.module_names)
    problem, hint = work
    hint_json = None if hint is None else hint.model_dump_json()
    return "solve", (problem.model_dump_json(), config.method, config.time_limit_s, hint_json, 1)


def ray_engine(config: EngineConfig) -> Engine:
    try:
        import ray
    except ModuleNotFoundError:
        raise StopBatch("--engine ray: ray is not installed: pip install 'pipesched[ray]'") from None
    if not ray.is_initialized():
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        try:
            ray.init(log_to_driver=False, include_dashboard=False)
        except (ConnectionError, RuntimeError) as e:
            where = os.environ.get("RAY_ADDRESS", "a local cluster")
            raise StopBatch(f"--address {where}: cannot join the Ray cluster: {str(e).splitlines()[0]}") from None
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    remote = ray.remote(num_cpus=1, max_retries=TASK_RETRIES, retry_exceptions=False)(_solve_chunk)
    kill_grace_s = max(5.0, config.time_limit_s)
    in_flight: dict[Any, list[int]] = {}
    lock = threading.Lock()

    def stream(work: list[Work], stop: threading.Event) -> Iterator[tuple[int, Answer, float]]:
        units = [unit_of(w, config) for w in work]
        pending = deque(range(len(units)))
        sizer = ChunkSizer(cpus * TASKS_PER_CPU)
        while (pending or in_flight) and not stop.is_set():
            while pending and len(in_flight) < cpus * TASKS_PER_CPU:
                chunk = [pending.popleft() for _ in range(sizer.next(len(pending)))]
                ref = remote.remote([units[i] for i in chunk], [config.time_limit_s] * len(chunk), kill_grace_s)
                with lock:
                    in_flight[ref] = chunk
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=0.2)
            for ref in ready:
                with lock:
                    chunk = in_flight.pop(ref)
                try:
                    results: list[Result] = ray.get(ref)
                except ray.exceptions.RayError as e:  # retries exhausted (every node it ran on died), or cancelled
                    reason = f"ray: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                    results = [("crashed", reason, 0.0)] * len(chunk)
                for index, (outcome, payload, seconds) in zip(chunk, results, strict=True):
                    sizer.observe(seconds)
                    yield index, answer_of(outcome, payload), seconds

    def stop() -> None:
        """Ctrl-C: cancel every task in flight (force: kills the Ray worker and its solver process)."""
        with lock:
            refs = list(in_flight)
        for ref in refs:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # already finished, or the cluster is gone
                continue

    def solve_one(_problem: Any, _hint: Any) -> Answer:
        raise AssertionError("the ray engine answers through stream()")

    return Engine(solve=solve_one, stop=stop, slots=cpus, stream=stream)


ENGINES["ray"] = ray_engine

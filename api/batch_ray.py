"""``pipesched batch --engine ray``: one Ray task per problem on a Ray cluster (``pipesched[ray]``).

Each task runs one solve exactly as the local engine does (a process forked from a warm
forkserver, killed at ``time_limit_s + grace``: :class:`~pipesched.api.solving.runner.ProcessRunner`).
Ray reuses its worker processes, so the solver modules and the forkserver are set up once per
worker, not once per problem. Answers come back to the driver (:mod:`pipesched.api.batch`), which
writes OUTDIR, the resume log, the progress bar and the summary exactly as for the local engine;
the driver keeps as many problems in flight as the cluster has CPUs.

Node loss: a task whose node dies is re-run elsewhere by Ray (``max_retries``, system failures
only: a solver error is an answer, not a reason to retry). The driver writes each problem's file
once, from the one answer it receives.

Importing this module registers the engine (``ENGINES["ray"]``); Ray itself is imported only when
the engine is made. The cluster address is ``RAY_ADDRESS`` (``--address`` sets it); without one,
Ray starts a local cluster on this machine.
"""

from __future__ import annotations

import os
import threading
from functools import cache
from typing import Any

from pipesched.solver.core.problem import Problem
from pipesched.solver.core.schedule import Schedule

from .batch_engines import ENGINES, Answer, Engine, EngineConfig, StopBatch, answer_of

#: Ray re-runs a task this many times when its node or worker process dies.
TASK_RETRIES = 3


def _solve_in_worker(problem_json: str, method: str, time_limit_s: float, hint_json: str | None,
                     kill_grace_s: float) -> tuple[str, str]:
    """Body of the Ray task: ``(outcome, schedule JSON or error)``; one runner per Ray worker."""
    return _runner(kill_grace_s).run(problem_json, method, time_limit_s, hint_json)


@cache
def _runner(kill_grace_s: float) -> Any:
    """The worker's runner. A Ray worker runs Ray's ``default_worker.py`` as ``__main__``, and
    multiprocessing re-imports the parent's main script in every child it starts (``spawn.prepare``),
    which here means importing Ray again in each solve process: ~1 s a solve, measured. The solve
    needs nothing from that script, so the worker's ``__main__`` forgets its file first."""
    import sys

    from .solving.runner import ProcessRunner

    main = sys.modules.get("__main__")
    if main is not None and getattr(main, "__spec__", None) is None:
        main.__dict__.pop("__file__", None)
    return ProcessRunner(kill_grace_s)


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
    slots = max(1, int(ray.cluster_resources().get("CPU", 1)))
    remote = ray.remote(num_cpus=1, max_retries=TASK_RETRIES, retry_exceptions=False)(_solve_in_worker)
    kill_grace_s = max(5.0, config.time_limit_s)
    in_flight: set[Any] = set()
    lock = threading.Lock()

    def solve(problem: Problem, hint: Schedule | None) -> Answer:
        hint_json = None if hint is None else hint.model_dump_json()
        ref = remote.remote(problem.model_dump_json(), config.method, config.time_limit_s, hint_json, kill_grace_s)
        with lock:
            in_flight.add(ref)
        try:
            outcome, payload = ray.get(ref)
        except ray.exceptions.RayError as e:  # retries exhausted (every node it ran on died), or cancelled
            return None, f"ray: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        finally:
            with lock:
                in_flight.discard(ref)
        return answer_of(outcome, payload)

    def stop() -> None:
        """Ctrl-C: cancel every task in flight (force: kills the Ray worker and its solver process)."""
        with lock:
            refs = list(in_flight)
        for ref in refs:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # already finished, or the cluster is gone
                continue

    return Engine(solve=solve, stop=stop, slots=slots)


ENGINES["ray"] = ray_engine

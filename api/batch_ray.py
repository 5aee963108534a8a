"""``pipesched batch --engine ray``: one Ray task per problem on a Ray cluster (``pipesched[ray]``).

Each task runs one solve exactly as the local engine does (a process forked from a warm
forkserver, killed at ``time_limit_s + grace``: :class:`~pipesched.api.solving.runner.ProcessRunner`).
Ray reuses its worker processes, so the solver modules and the forkserver are set up once per
worker, not once per problem. Results come back to the driver, which writes OUTDIR, the resume
check and the summary exactly as the local engine does (:mod:`pipesched.api.batch`).

Node loss: a task whose node dies is re-run elsewhere by Ray (``max_retries``, system failures
only: a solver error is an answer, not a reason to retry). The driver writes each problem's file
once, from the one result it receives.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache
from typing import Any

from pipesched.solver.core.problem import Problem

#: Ray re-runs a task this many times when its node or worker process dies.
TASK_RETRIES = 3


def _solve_in_worker(problem_json: str, method: str, time_limit_s: float, kill_grace_s: float) -> tuple[str, str]:
    """Body of the Ray task: ``(outcome, schedule JSON or error)``; the runner is kept per worker."""
    return _runner(kill_grace_s).run(problem_json, method, time_limit_s, None)


@cache
def _runner(kill_grace_s: float) -> Any:
    from .solving.runner import ProcessRunner

    return ProcessRunner(kill_grace_s)


def connect(address: str | None) -> int:
    """Join the cluster at ``address`` (``auto`` or ``host:port``; None starts a local one).

    Returns the cluster's CPU count: how many problems the driver keeps in flight.
    """
    import ray

    if not ray.is_initialized():
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        ray.init(address=address, log_to_driver=False, include_dashboard=False)
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def ray_solver(method: str, time_limit_s: float, kill_grace_s: float) -> Callable[[Problem], tuple[str | None, str | None]]:
    """A function ``problem -> (schedule JSON, error)`` that runs one Ray task and waits for it.

    The batch driver calls it from as many threads as the cluster has CPUs; Ray places the tasks.
    """
    import ray

    remote = ray.remote(num_cpus=1, max_retries=TASK_RETRIES, retry_exceptions=False)(_solve_in_worker)

    def solve(problem: Problem) -> tuple[str | None, str | None]:
        try:
            outcome, payload = ray.get(remote.remote(problem.model_dump_json(), method, time_limit_s, kill_grace_s))
        except ray.exceptions.RayError as e:  # retries exhausted (every node it ran on died) or cluster gone
            return None, f"ray: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        return (payload, None) if outcome == "ok" else (None, payload)

    return solve

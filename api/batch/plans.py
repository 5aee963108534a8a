"""Where ``pipesched batch`` runs a plan request (a line or file that is ``{"model", "cluster"}``).

Locally: one killable process per plan, forked like the solves (:func:`~pipesched.api.solving.
plan_worker.run_plan`, killed at ``time_limit_s + grace``). With ``--server``: ``POST /v1/plan``
through :meth:`pipesched.client.Client.plan`, so the service's plan cache answers repeats. A
streaming engine (``--engine ray``) plans on its own workers and needs none of these
(:mod:`pipesched.api.batch.ray`); an engine that can neither fails each plan item with that reason
and the rest of the sweep runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..models import PlanRequest
from .engines import Answer, EngineConfig, StopBatch, answer_of, stop_runner


@dataclass
class PlanEngine:
    """``plan(request)`` answers one plan request with the Plan JSON (may raise :class:`StopBatch`)."""

    plan: Callable[[PlanRequest], Answer]
    stop: Callable[[], None] = field(default=lambda: None)


def local_plans(config: EngineConfig) -> PlanEngine:
    from ..solving.plan_worker import run_plan
    from ..solving.runner import ProcessRunner

    runner = ProcessRunner(kill_grace_s=max(5.0, config.time_limit_s))

    def plan(req: PlanRequest) -> Answer:
        args = (req.model.model_dump_json(), req.cluster.model_dump_json(), config.method, config.time_limit_s,
                req.module_names)
        return answer_of(*runner.call(run_plan, args, config.time_limit_s))

    return PlanEngine(plan=plan, stop=lambda: stop_runner(runner))


def server_plans(config: EngineConfig) -> PlanEngine:
    from pipesched.client import Client, ServiceError

    assert config.server is not None
    client = Client(config.server, token=config.token, cache_dir=False, timeout=config.time_limit_s + 60,
                    deadline_s=None)  # a sweep waits for each answer as long as the service works on it

    def plan(req: PlanRequest) -> Answer:
        try:
            found = client.plan(req.model, req.cluster, config.method, config.time_limit_s,
                                module_names=req.module_names)
            return found.model_dump_json(), None
        except ServiceError as e:
            if e.status in (0, 401, 403) or (e.status == 422 and "unknown method" in str(e)):
                raise StopBatch(f"--server {config.server}: {e}") from None
            return None, str(e)

    return PlanEngine(plan=plan)


def unsupported_plans(engine: str) -> PlanEngine:
    def plan(_req: PlanRequest) -> Answer:
        return None, f"--engine {engine} does not plan models: run plan requests locally or with --server"

    return PlanEngine(plan=plan)


def make_plan_engine(engine: str, config: EngineConfig) -> PlanEngine:
    if config.server:
        return server_plans(config)
    return local_plans(config) if engine == "local" else unsupported_plans(engine)

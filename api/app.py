"""The FastAPI application: wiring only. The lifespan owns the store and the solver processes.

``create_app(settings)`` builds one app; ``pipesched serve`` runs it under uvicorn. Routers are
per resource (solve, plan, jobs, schedules, ops, page); handlers reach the shared state through
FastAPI dependencies (:mod:`pipesched.api.http.deps`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response

from pipesched import __version__
from pipesched.solver import methods

from .http import page
from .http.deps import respond
from .http.docs import add_offline_docs
from .http.errors import RequestIds, configure_logging
from .http.middleware import CacheHitFastPath, Guard
from .http.routes import jobs, ops, plan, schedules, solve
from .http.schema import constrain
from .models import PlanRequest, SolveRequest
from .services.accept import BodyMemo
from .services.health import Health
from .services.jobs import JobManager
from .services.metrics import Metrics
from .services.plan import PlanJobs
from .services.replies import unavailable_reply, validation_reply
from .services.state import Service
from .settings import Settings
from .solving.runner import ProcessRunner
from .store import Cache, Store, StoreUnavailable


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store = Store(settings.db, settings.table_prefix)
        cache = Cache(store, settings.memo_entries, settings.memo_ttl_s)
        runner = ProcessRunner(settings.kill_grace_s)
        manager = JobManager(settings, cache, metrics, runner)
        plans = PlanJobs(settings, runner)  # POST /v1/plan: its own table and jobs
        # Store calls, solve waits and plan waits each hold a thread; the default pool (CPUs + 4) made
        # requests queue behind an unreachable database's waits.
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(settings.threads, "pipesched"))
        health = Health(store)
        app.state.service = Service(settings, store, cache, metrics, manager, plans, BodyMemo(settings.memo_entries),
                                    health)
        if settings.workers == "external":
            from .scaleout.front import ExternalJobs

            app.state.service.external = ExternalJobs(settings, store, cache)
            await app.state.service.external.start()
        # Import the solver modules (OR-Tools, PuLP: seconds) off the event loop now, not inside
        # the first request's method check.
        warm = asyncio.create_task(asyncio.to_thread(methods))
        try:
            yield
        finally:
            warm.cancel()
            await manager.close()
            await plans.close()
            if app.state.service.external is not None:
                await app.state.service.external.close()
            health.close()
            store.close()

    app = FastAPI(
        title="pipesched",
        version=__version__,
        description="Pipeline-parallel schedules, solved once and served from a shared cache.",
        lifespan=lifespan,
        docs_url=None,  # add_offline_docs serves /docs and /redoc with packaged assets (no CDN)
        redoc_url=None,
    )
    add_offline_docs(app)
    app.add_exception_handler(RequestValidationError, validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(StoreUnavailable, store_unavailable)  # type: ignore[arg-type]
    for router in (solve.router, plan.router, jobs.router, schedules.router, ops.router, page.router):
        app.include_router(router)
    app.add_middleware(CacheHitFastPath, max_body_bytes=settings.max_body_bytes)
    app.add_middleware(Guard, max_body_bytes=settings.max_body_bytes, metrics=metrics,
                       body_timeout_s=settings.body_timeout_s)
    app.add_middleware(RequestIds)  # outermost: ids every request, logs and answers unexpected errors
    configure_logging()
    app.openapi = _openapi_with_hand_parsed_bodies(app, settings)  # type: ignore[method-assign]
    return app


async def store_unavailable(_request: Request, exc: StoreUnavailable) -> Response:
    return respond(unavailable_reply(exc))


async def validation_error(_request: Request, exc: RequestValidationError) -> Response:
    return respond(validation_reply(exc.errors()))


def _openapi_with_hand_parsed_bodies(app: FastAPI, settings: Settings) -> Callable[[], dict[str, Any]]:
    """FastAPI's schema plus ``SolveRequest`` and ``PlanRequest``, the bodies their routes parse by hand,
    with the service's ranges and caps (:mod:`pipesched.api.http.schema`)."""
    default = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = default()
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for body in (SolveRequest, PlanRequest):
            request = body.model_json_schema(ref_template=f"#/components/schemas/{body.__name__}_{{model}}")
            for name, sub in request.pop("$defs", {}).items():
                components[f"{body.__name__}_{name}"] = sub
            components[body.__name__] = request
        constrain(components, settings, [m.name for m in methods()])
        app.openapi_schema = schema
        return schema

    return openapi

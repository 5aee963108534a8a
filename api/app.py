"""The FastAPI application: wiring only. The lifespan owns the store and the solver processes.

``create_app(settings)`` builds one app; ``pipesched serve`` runs it under uvicorn. Routers are
per resource (solve, jobs, schedules, ops, page); handlers reach the shared state through
:func:`pipesched.api.deps.service`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pipesched import __version__
from pipesched.solver.registry import methods

from . import page
from .bodies import validation_error_response
from .cache import BodyMemo, Cache
from .jobs import JobManager
from .metrics import Metrics
from .models import SolveRequest
from .routes import jobs, ops, schedules, solve
from .runner import ProcessRunner
from .service import Service
from .settings import Settings
from .store import Store


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store = Store(settings.db, settings.table_prefix)
        cache = Cache(store, settings.memo_entries, settings.memo_ttl_s)
        runner = ProcessRunner(settings.kill_grace_s)
        manager = JobManager(settings, cache, metrics, runner)
        app.state.service = Service(settings, store, cache, metrics, manager, BodyMemo(settings.memo_entries))
        # Import the solver modules (OR-Tools, PuLP: seconds) off the event loop now, not inside
        # the first request's method check.
        warm = asyncio.create_task(asyncio.to_thread(methods))
        try:
            yield
        finally:
            warm.cancel()
            await manager.close()
            store.close()

    app = FastAPI(
        title="pipesched",
        version=__version__,
        description="Pipeline-parallel schedules, solved once and served from a shared cache.",
        lifespan=lifespan,
    )
    app.add_exception_handler(RequestValidationError, validation_error)  # type: ignore[arg-type]
    for router in (solve.router, jobs.router, schedules.router, ops.router, page.router):
        app.include_router(router)
    app.add_middleware(Guard, max_body_bytes=settings.max_body_bytes, metrics=metrics)
    app.openapi = _openapi_with_solve_request(app)  # type: ignore[method-assign]
    return app


async def validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
    return validation_error_response(exc.errors())


def _openapi_with_solve_request(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """FastAPI's schema plus ``SolveRequest``, whose body the solve route parses by hand."""
    default = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = default()
        request = SolveRequest.model_json_schema(ref_template="#/components/schemas/SolveRequest_{model}")
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for name, sub in request.pop("$defs", {}).items():
            components[f"SolveRequest_{name}"] = sub
        components["SolveRequest"] = request
        app.openapi_schema = schema
        return schema

    return openapi


class Guard:
    """Pure ASGI middleware: refuses bodies over ``max_body_bytes`` (413) and counts requests.

    Written against ASGI directly (not ``BaseHTTPMiddleware``) because it wraps every cache hit
    and must cost next to nothing.
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int, metrics: Metrics) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def counting_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            length = _content_length(scope)
            if length is not None and length > self.max_body_bytes:
                await self._too_large(counting_send, length)
                return
            if length is None and scope["method"] in ("POST", "PUT", "PATCH"):
                body = await _read_capped(receive, self.max_body_bytes)
                if body is None:
                    await self._too_large(counting_send, None)
                    return
                receive = _replay(body, receive)
            await self.app(scope, receive, counting_send)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or "unmatched"
            self.metrics.requests[(path, scope["method"], status)] += 1

    async def _too_large(self, send: Send, length: int | None) -> None:
        size = f"{length} bytes" if length is not None else "the body"
        body = json.dumps({
            "detail": f"request body too large: {size} is over the cap of {self.max_body_bytes} bytes (max_body_bytes)",
            "cap": "max_body_bytes",
            "limit": self.max_body_bytes,
        }).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _read_capped(receive: Receive, cap: int) -> bytes | None:
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > cap:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, then: Receive) -> Receive:
    """Hand the already-read body to the app once, then pass through (e.g. the disconnect)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await then()

    return receive

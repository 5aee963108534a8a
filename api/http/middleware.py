"""Pure ASGI middleware (no ``BaseHTTPMiddleware``: these wrap every request and must cost next to nothing).

``Guard`` refuses bodies over the size cap and counts requests for ``/metrics``.
``CacheHitFastPath`` answers cache hits of ``POST /v1/solve``, the commonest request of all,
before FastAPI's routing, dependency resolution and request/response objects: the same token
check, the same admission (:mod:`pipesched.api.services.accept`), the same rule for which entry
answers (:func:`~pipesched.api.services.solve.answer_from_cache`) and the same bytes as the route,
with none of the framework's per-request work. It reads the in-process memo only, never the store,
so it cannot block the event loop. Anything else (a miss, an entry that needs a larger budget, a
bad body, a wrong token) goes on to the route unchanged.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..services.accept import Accepted
from ..services.metrics import Metrics
from ..services.replies import Reply, json_reply, solve_reply
from ..services.solve import memo_answer
from .deps import token_ok

#: What ``Guard`` labels a request answered by the fast path with (the route it stands in for).
_SOLVE_ROUTE = SimpleNamespace(path="/v1/solve")


class CacheHitFastPath:
    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != "/v1/solve":
            await self.app(scope, receive, send)
            return
        body = await _read_capped(receive, self.max_body_bytes)  # Guard has already enforced the cap
        if body is None:
            body = b""
        answer = _cached_answer(scope, body)
        if answer is None:
            await self.app(scope, _replay(body, receive), send)
            return
        scope["route"] = _SOLVE_ROUTE
        await send_reply(send, answer)


async def send_reply(send: Send, reply: Reply, extra: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    """Send a service :class:`Reply` as the whole ASGI response."""
    body = reply.body.encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               *((k.lower().encode(), v.encode("latin-1")) for k, v in reply.headers.items()), *extra]
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _cached_answer(scope: Scope, body: bytes) -> Reply | None:
    """The route's answer when it is a cache hit, or None to let the route decide (and explain)."""
    svc = scope["app"].state.service
    if svc.settings.token and not token_ok(svc.settings.token, _header(scope, b"authorization")):
        return None
    accepted = svc.accepted.accept(body, svc.settings)
    if not isinstance(accepted, Accepted):
        return None  # the route builds the same 422
    hit = memo_answer(svc.cache, accepted)
    if hit is None:
        return None
    svc.metrics.cache_hits += 1
    svc.metrics.fast_hits += 1
    return solve_reply(accepted.key, True, hit, accepted.problem_json)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


class Guard:
    """Refuses bodies over ``max_body_bytes`` (413) and bodies not complete within ``body_timeout_s`` of
    the request head (408: a client that stalls mid-body no longer holds its connection), and counts
    requests by route and status."""

    def __init__(self, app: ASGIApp, max_body_bytes: int, metrics: Metrics, body_timeout_s: float = 20.0) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.metrics = metrics
        self.body_timeout_s = body_timeout_s

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
            if scope["method"] in ("POST", "PUT", "PATCH"):
                try:
                    body = await asyncio.wait_for(_read_capped(receive, self.max_body_bytes), self.body_timeout_s)
                except TimeoutError:
                    await send_reply(counting_send, json_reply(408, {
                        "detail": f"request body not received within {self.body_timeout_s:g} s (body_timeout_s)",
                        "cap": "body_timeout_s", "limit": self.body_timeout_s}), ((b"connection", b"close"),))
                    return
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
        await send_reply(send, json_reply(413, {
            "detail": f"request body too large: {size} is over the cap of {self.max_body_bytes} bytes (max_body_bytes)",
            "cap": "max_body_bytes", "limit": self.max_body_bytes}), ((b"connection", b"close"),))


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

"""Every request gets an id; every unexpected error is logged with its traceback and that id.

``RequestIds`` is the outermost pure ASGI layer: it names each request (``x-request-id`` on every
response, the caller's own header when it sends a sane one), and when anything below raises it
logs the traceback under that id and answers ``500 {"detail", "request_id"}`` as JSON instead of
Starlette's plain-text page. The id is also in :data:`REQUEST_ID` for code that builds its own 500
(a solve that failed in its process), so the body a user quotes finds the log line.
"""

from __future__ import annotations

import json
import logging
import re
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..services.log import REQUEST_ID, log

_SANE_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def _incoming_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id":
            text = value.decode("latin-1")
            return text if _SANE_ID.match(text) else None
    return None


def internal_error_body(request_id: str, what: str = "internal server error") -> dict[str, str]:
    return {"detail": f"{what}; the server log has the details under request id {request_id}",
            "request_id": request_id}


class RequestIds:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = _incoming_id(scope) or uuid.uuid4().hex[:16]
        token = REQUEST_ID.set(rid)
        started = False

        async def tagged_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", rid.encode())]}
            await send(message)

        try:
            await self.app(scope, receive, tagged_send)
        except Exception:
            log.exception("request %s: %s %s failed", rid, scope.get("method"), scope.get("path"))
            if started:  # the status line is out; all we can do is end the connection
                raise
            body = json.dumps(internal_error_body(rid)).encode()
            await send({"type": "http.response.start", "status": 500, "headers": [
                (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                (b"x-request-id", rid.encode())]})
            await send({"type": "http.response.body", "body": body})
        finally:
            REQUEST_ID.reset(token)


def configure_logging() -> None:
    """Errors (with tracebacks) to stderr even when uvicorn's log level is ``warning``."""
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False

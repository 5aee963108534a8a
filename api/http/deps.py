"""FastAPI dependencies: the shared service state, the request body, and the optional bearer token.

The token is a dependency of the POST routes (``dependencies=[TokenRequired]``), so FastAPI checks it
before the handler runs and before the body is read; the cache-hit fast path, which runs before
FastAPI, uses the same :func:`token_ok`.
"""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.responses import Response

from ..services.replies import Reply
from ..services.state import Service

REFUSED = "missing or wrong bearer token: send 'Authorization: Bearer <token>'"


def token_ok(token: str | None, authorization: str | None) -> bool:
    """True when the service has no token or ``authorization`` is ``Bearer <token>``."""
    if not token:
        return True
    scheme, _, given = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and secrets.compare_digest(given.strip().encode(), token.encode())


async def service(request: Request) -> Service:
    return request.app.state.service


ServiceDep = Annotated[Service, Depends(service)]


async def require_token(request: Request, svc: ServiceDep) -> None:
    """401 (``WWW-Authenticate: Bearer``) when the service has a token and the request lacks it."""
    if not token_ok(svc.settings.token, request.headers.get("authorization")):
        raise HTTPException(401, REFUSED, headers={"WWW-Authenticate": "Bearer"})


TokenRequired = Depends(require_token)


async def body(request: Request) -> bytes:
    """The raw body: the POST routes parse it themselves (pydantic straight from the bytes, one 422 shape)."""
    return await request.body()


BodyDep = Annotated[bytes, Depends(body)]


def respond(reply: Reply) -> Response:
    """A service :class:`Reply` as the HTTP response."""
    return Response(reply.body, status_code=reply.status, media_type="application/json", headers=reply.headers)

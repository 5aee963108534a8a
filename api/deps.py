"""FastAPI dependencies (the shared service state) and the optional bearer token check."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Request
from fastapi.responses import JSONResponse

from .service import Service


async def service(request: Request) -> Service:
    return request.app.state.service


_REFUSED = "missing or wrong bearer token: send 'Authorization: Bearer <token>'"


def token_ok(token: str | None, authorization: str | None) -> bool:
    """True when the service has no token or ``authorization`` is ``Bearer <token>``."""
    if not token:
        return True
    scheme, _, given = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and secrets.compare_digest(given.strip().encode(), token.encode())


def token_refusal(token: str | None, authorization: str | None) -> JSONResponse | None:
    """401 when the service has a token and ``authorization`` is not ``Bearer <token>``."""
    if token_ok(token, authorization):
        return None
    return JSONResponse({"detail": _REFUSED}, status_code=401, headers={"WWW-Authenticate": "Bearer"})


ServiceDep = Annotated[Service, Depends(service)]

"""FastAPI dependencies: the shared service state and the optional bearer token."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request

from .service import Service


def service(request: Request) -> Service:
    return request.app.state.service


def require_token(
    request: Request,
    authorization: Annotated[str | None, Header(description="'Bearer <token>' when the service has a token.")] = None,
) -> None:
    """Protects POST routes when the service was started with ``--token`` (or ``PIPESCHED_TOKEN``)."""
    token = request.app.state.service.settings.token
    if not token:
        return
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not secrets.compare_digest(given.strip().encode(), token.encode()):
        raise HTTPException(
            status_code=401,
            detail="missing or wrong bearer token: send 'Authorization: Bearer <token>'",
            headers={"WWW-Authenticate": "Bearer"},
        )


ServiceDep = Annotated[Service, Depends(service)]
TokenDep = Depends(require_token)

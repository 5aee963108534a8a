"""``POST /v1/solve``: answer from the cache, or solve (the rules: :mod:`pipesched.api.services.solve`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header
from fastapi.responses import Response

from ...models import SolveResponse
from ...scaleout import PRIORITY_HEADER
from ...services import solve as solving
from ..deps import BodyDep, ServiceDep, TokenRequired, respond
from .posts import POST_RESPONSES, request_body

router = APIRouter(tags=["solve"])


@router.post(
    "/v1/solve",
    response_model=SolveResponse,
    dependencies=[TokenRequired],
    # The body is parsed by hand (pydantic straight from the JSON bytes): this is the cache-hit path.
    openapi_extra=request_body("SolveRequest"),
    responses=POST_RESPONSES,
)
async def solve(svc: ServiceDep, body: BodyDep,
                priority: Annotated[str | None, Header(alias=PRIORITY_HEADER, include_in_schema=False)] = None,
                ) -> Response:
    """Solve a problem, or answer from the cache (which entry answers: see the service's rules)."""
    accepted = svc.accepted.accept(body, svc.settings)
    if not isinstance(accepted, solving.Accepted):
        return respond(accepted)
    return respond(await solving.solve(svc, accepted, priority))

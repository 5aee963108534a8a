"""Operations: ``/healthz`` (store reachable), ``/metrics`` (Prometheus) and ``/v1/methods``."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse, Response

from pipesched.solver import methods

from ...models import MethodOut
from ..deps import ServiceDep, respond

router = APIRouter(tags=["ops"])


@router.get("/healthz", responses={503: {"description": "The store cannot be read or written now: the "
                                     "reason in words, and Retry-After."}})
async def healthz(svc: ServiceDep) -> Response:
    """``{"status": "ok", "store"}``, or 503 ``{"status": "unavailable", "store", "reason"}``; at once."""
    return respond(await svc.health.reply())


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(svc: ServiceDep) -> PlainTextResponse:
    return PlainTextResponse(svc.metrics.render(), media_type="text/plain; version=0.0.4")


@router.get("/v1/methods", response_model=list[MethodOut])
async def list_methods() -> list[MethodOut]:
    return [MethodOut(name=m.name, summary=m.summary) for m in methods()]

"""Operations: ``/healthz`` (store reachable), ``/metrics`` (Prometheus) and ``/v1/methods``."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse

from pipesched.solver import methods

from ...models import MethodOut
from ..deps import ServiceDep

router = APIRouter(tags=["ops"])


@router.get("/healthz", responses={503: {"description": "The store cannot be reached."}})
async def healthz(svc: ServiceDep) -> JSONResponse:
    try:
        await asyncio.to_thread(svc.store.ping)
    except Exception as e:
        return JSONResponse({"status": "unavailable", "store": f"{type(e).__name__}: {e}"}, status_code=503)
    return JSONResponse({"status": "ok", "store": svc.store.dialect})


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(svc: ServiceDep) -> PlainTextResponse:
    return PlainTextResponse(svc.metrics.render(), media_type="text/plain; version=0.0.4")


@router.get("/v1/methods", response_model=list[MethodOut])
async def list_methods() -> list[MethodOut]:
    return [MethodOut(name=m.name, summary=m.summary) for m in methods()]

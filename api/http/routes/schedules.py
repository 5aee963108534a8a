"""``GET /v1/schedules/{key}`` and its renderings: Gantt SVG, torch CSV, and the schedule file alone."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse, Response

from pipesched.solver.core.schedule import Schedule

from ...models import KEY_PATTERN, EntryOut, ErrorBody
from ...services.replies import entry_reply
from ...store import Hit
from ..deps import ServiceDep, respond

router = APIRouter(tags=["schedules"])

Key = Annotated[str, Path(pattern=KEY_PATTERN, description="Cache key from POST /v1/solve.")]
Method = Annotated[
    str | None, Query(max_length=64, description="Which method's entry; the best over all methods when omitted.")
]
_NOT_FOUND = {404: {"model": ErrorBody}}


async def _find(svc: ServiceDep, key: str, method: str | None) -> Hit | JSONResponse:
    hit = await asyncio.to_thread(lambda: svc.cache.get(key, method) if method else svc.cache.best(key))
    if hit is None:
        what = f" solved with {method!r}" if method else ""
        return JSONResponse({"detail": f"no cached schedule{what} for key {key}"}, status_code=404)
    return hit


@router.get("/v1/schedules/{key}", response_model=EntryOut, responses=_NOT_FOUND)
async def get_schedule(key: Key, svc: ServiceDep, method: Method = None) -> Response:
    """The cached entry: best schedule known, its status, bound, method and solve time spent."""
    hit = await _find(svc, key, method)
    return hit if isinstance(hit, JSONResponse) else respond(entry_reply(hit))


@router.get("/v1/schedules/{key}/gantt.svg", response_class=Response, responses={
    200: {"content": {"image/svg+xml": {}}, "description": "Gantt chart, one row per device."}, **_NOT_FOUND})
async def get_gantt(key: Key, svc: ServiceDep, method: Method = None) -> Response:
    hit = await _find(svc, key, method)
    if isinstance(hit, JSONResponse):
        return hit
    from pipesched.solver.formats.render import render_svg

    svg = render_svg(Schedule.model_validate_json(hit.entry.schedule_json))
    return Response(svg, media_type="image/svg+xml")


@router.get("/v1/schedules/{key}/torch.csv", response_class=Response, responses={
    200: {"content": {"text/csv": {}}, "description": "torch.distributed.pipelining compute-only CSV."},
    **_NOT_FOUND})
async def get_torch_csv(key: Key, svc: ServiceDep, method: Method = None) -> Response:
    hit = await _find(svc, key, method)
    if isinstance(hit, JSONResponse):
        return hit
    from pipesched.solver.formats.torch_csv import to_torch_csv
    schedule = Schedule.model_validate_json(hit.entry.schedule_json)
    if not schedule.ops:
        return JSONResponse({"detail": f"entry {key} has no schedule (status {schedule.status})"}, status_code=404)
    return Response(to_torch_csv(schedule), media_type="text/csv")


@router.get("/v1/schedules/{key}/schedule.json", response_class=Response, responses={
    200: {"content": {"application/json": {}}, "description": "The schedule as `pipesched solve -o` writes it."},
    **_NOT_FOUND})
async def get_schedule_file(key: Key, svc: ServiceDep, method: Method = None) -> Response:
    """The schedule alone, byte for byte as stored (the JSON ``pipesched solve -o`` writes), so the
    page's download is a file ``pipesched render``, ``validate`` and ``export`` read as it is."""
    hit = await _find(svc, key, method)
    if isinstance(hit, JSONResponse):
        return hit
    name = f"schedule-{hit.entry.method}.json"
    return Response(hit.entry.schedule_json, media_type="application/json",
                    headers={"content-disposition": f'attachment; filename="{name}"'})

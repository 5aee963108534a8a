"""``GET /v1/schedules/{key}/schedule.json``: the schedule file the page offers for download.

``GET /v1/schedules/{key}`` wraps the schedule in the cache entry's bookkeeping; this route returns
the schedule alone, byte for byte as stored (the JSON ``pipesched solve -o`` writes), so the
download is a file that ``pipesched render``, ``validate`` and ``export`` read as it is. Served
next to ``gantt.svg`` and ``torch.csv`` with the same ``method`` query.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from .deps import ServiceDep
from .models import ErrorBody
from .routes.schedules import Key, Method

router = APIRouter(tags=["schedules"])


@router.get("/v1/schedules/{key}/schedule.json", response_class=Response, responses={
    200: {"content": {"application/json": {}}, "description": "The schedule as `pipesched solve -o` writes it."},
    404: {"model": ErrorBody}})
async def get_schedule_file(key: Key, svc: ServiceDep, method: Method = None) -> Response:
    hit = svc.cache.get(key, method) if method else svc.cache.best(key)
    if hit is None:
        what = f" solved with {method!r}" if method else ""
        return JSONResponse({"detail": f"no cached schedule{what} for key {key}"}, status_code=404)
    name = f"schedule-{hit.entry.method}.json"
    return Response(hit.entry.schedule_json, media_type="application/json",
                    headers={"content-disposition": f'attachment; filename="{name}"'})

"""``GET /v1/schedules/{key}/schedule.json``: the schedule file the page offers for download.

``GET /v1/schedules/{key}`` wraps the schedule in the cache entry's bookkeeping; this route returns
the schedule alone, byte for byte as stored (the JSON ``pipesched solve -o`` writes), so the
download is a file that ``pipesched render``, ``validate`` and ``export`` read as it is. Served
next to ``gantt.svg`` and ``torch.csv`` with the same ``method`` query.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse, Response

from .deps import ServiceDep
from .models import KEY_PATTERN, ErrorBody

router = APIRouter(tags=["schedules"])

# The same parameters as the other renderings (api/routes/schedules.py); only the app imports routes.
Key = Annotated[str, Path(pattern=KEY_PATTERN, description="Cache key from POST /v1/solve.")]
Method = Annotated[
    str | None, Query(max_length=64, description="Which method's entry; the best over all methods when omitted.")
]


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

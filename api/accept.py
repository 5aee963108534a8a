"""Admission of a ``POST /v1/solve`` body: parse, check every cap and the method, and key it.

One module for the route and for the middleware's cache-hit fast path, so both accept exactly the
same requests and answer a bad one with the same 422 (which field, what value, which cap).
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse
from pydantic import ValidationError

from pipesched.solver import get_method
from pipesched.solver.core.canonical import problem_key
from pipesched.solver.core.errors import NotApplicableError

from .bodies import validation_error_response
from .cache import Accepted
from .models import SolveRequest
from .settings import Settings


def accept(body: bytes, settings: Settings) -> Accepted | JSONResponse:
    """Parse and check a request body: the request to act on, or the 422 saying what is wrong."""
    try:
        req = SolveRequest.model_validate_json(body)
    except ValidationError as e:
        return validation_error_response(e.errors(), ("body",))
    time_limit_s = req.time_limit_s if req.time_limit_s is not None else settings.default_time_limit_s
    refused = _over_caps(req, time_limit_s, settings) or _method_error(req)
    if refused is not None:
        return refused
    wait_s = min(req.wait_s if req.wait_s is not None else settings.default_wait_s, settings.max_wait_s)
    return Accepted(key=problem_key(req.problem), method=req.method, problem_json=req.problem.model_dump_json(),
                    time_limit_s=time_limit_s, wait_s=wait_s)


def _over_caps(req: SolveRequest, time_limit_s: float, settings: Settings) -> JSONResponse | None:
    """422 naming every service cap the request exceeds (the problem model has its own, looser, ones)."""
    p = req.problem
    checks: list[tuple[str, float, float, list[str]]] = [
        ("service_max_devices", p.devices, settings.service_max_devices, ["problem", "devices"]),
        ("service_max_microbatches", p.microbatches, settings.service_max_microbatches, ["problem", "microbatches"]),
        ("service_max_stages_per_device", p.stages_per_device, settings.service_max_stages_per_device,
         ["problem", "stages_per_device"]),
        ("service_max_ops", p.num_ops, settings.service_max_ops, ["problem"]),
        ("max_time_limit_s", time_limit_s, settings.max_time_limit_s, ["time_limit_s"]),
    ]
    detail: list[dict[str, Any]] = []
    for cap, value, limit, loc in checks:
        if value > limit:
            what = "the problem's op count" if cap == "service_max_ops" else loc[-1]
            detail.append({
                "loc": ["body", *loc], "type": "cap_exceeded", "cap": cap, "limit": limit,
                "msg": f"{what} is {value:g}, over this service's cap {cap} = {limit:g}",
            })
    if not detail:
        return None
    line = "; ".join(f"{'.'.join(d['loc'][1:])}: {d['msg']}" for d in detail)
    return JSONResponse({"detail": detail, "error": line}, status_code=422)


def _method_error(req: SolveRequest) -> JSONResponse | None:
    try:
        reason = get_method(req.method).applies(req.problem)
        if reason:
            raise NotApplicableError(f"method {req.method!r} does not apply: {reason}")
    except NotApplicableError as e:
        detail = [{"loc": ["body", "method"], "msg": str(e), "type": "not_applicable"}]
        return JSONResponse({"detail": detail, "error": f"method: {e}"}, status_code=422)
    return None

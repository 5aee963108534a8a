"""Admission of a ``POST /v1/solve`` or ``POST /v1/plan`` body: parse, check every cap and the
method, and key it.

One module for the route and for the middleware's cache-hit fast path, so both accept exactly the
same requests and answer a bad one with the same 422 (which field, what value, which cap).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from pipesched.solver import get_method
from pipesched.solver.core.canonical import problem_key
from pipesched.solver.core.errors import NotApplicableError

from ..models import SolveRequest
from ..settings import Settings
from .replies import Reply, refusal_reply, validation_reply

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Accepted:
    """A solve request that passed validation, the caps and the method check."""

    key: str
    method: str
    problem_json: str  # the problem as the caller wrote it, dumped by the model
    time_limit_s: float
    wait_s: float


def parse(model: type[M], body: bytes) -> M | Reply:
    """The request model, or the 422 naming every field that is wrong."""
    try:
        return model.model_validate_json(body)
    except ValidationError as e:
        return validation_reply(e.errors(), ("body",))


def budgets(req: Any, settings: Settings) -> tuple[float, float]:
    """``(time_limit_s, wait_s)``: the request's, or the service defaults; the wait capped by the service."""
    # the default never exceeds the service's own cap (a request that sent nothing is never refused for it)
    time_limit_s = (req.time_limit_s if req.time_limit_s is not None
                    else min(settings.default_time_limit_s, settings.max_time_limit_s))
    wait_s = min(req.wait_s if req.wait_s is not None else settings.default_wait_s, settings.max_wait_s)
    return time_limit_s, wait_s


def over_caps(checks: list[tuple[str, float, float, list[str]]], ops_what: str) -> list[dict[str, Any]]:
    """An error item for every ``(cap, value, limit, loc)`` whose value is over its limit."""
    return [{"loc": ["body", *loc], "type": "cap_exceeded", "cap": cap, "limit": limit,
             "msg": f"{ops_what if cap == 'service_max_ops' else loc[-1]} is {value:g}, "
                    f"over this service's cap {cap} = {limit:g}"}
            for cap, value, limit, loc in checks if value > limit]


def accept(body: bytes, settings: Settings) -> Accepted | Reply:
    """Parse and check a request body: the request to act on, or the 422 saying what is wrong."""
    req = parse(SolveRequest, body)
    if isinstance(req, Reply):
        return req
    time_limit_s, wait_s = budgets(req, settings)
    p = req.problem
    detail = over_caps([
        ("service_max_devices", p.devices, settings.service_max_devices, ["problem", "devices"]),
        ("service_max_microbatches", p.microbatches, settings.service_max_microbatches, ["problem", "microbatches"]),
        ("service_max_stages_per_device", p.stages_per_device, settings.service_max_stages_per_device,
         ["problem", "stages_per_device"]),
        ("service_max_ops", p.num_ops, settings.service_max_ops, ["problem"]),
        ("max_time_limit_s", time_limit_s, settings.max_time_limit_s, ["time_limit_s"]),
    ], "the problem's op count") or _method_error(req)
    if detail:
        return refusal_reply(detail)
    return Accepted(key=problem_key(p), method=req.method, problem_json=p.model_dump_json(),
                    time_limit_s=time_limit_s, wait_s=wait_s)


def _method_error(req: SolveRequest) -> list[dict[str, Any]]:
    try:
        reason = get_method(req.method).applies(req.problem)
        if reason:
            raise NotApplicableError(f"method {req.method!r} does not apply: {reason}")
    except NotApplicableError as e:
        return [{"loc": ["body", "method"], "msg": str(e), "type": "not_applicable"}]
    return []


class BodyMemo:
    """Request bodies already accepted, by their exact bytes (small bodies only, LRU).

    Trainers re-send byte-identical requests; for those the validation and canonical key are
    already known. Settings and methods are fixed for the life of the process, so the same bytes
    always get the same answer.
    """

    def __init__(self, size: int = 4096, max_body: int = 16 * 1024) -> None:
        self.size, self.max_body = size, max_body
        self._items: OrderedDict[bytes, Accepted] = OrderedDict()

    def get(self, body: bytes) -> Accepted | None:
        return self._items.get(body)

    def put(self, body: bytes, accepted: Accepted) -> Accepted:
        if len(body) <= self.max_body:
            self._items[body] = accepted
            if len(self._items) > self.size:
                self._items.popitem(last=False)
        return accepted

    def accept(self, body: bytes, settings: Settings) -> Accepted | Reply:
        """:func:`accept`, skipping the work for a body seen before."""
        seen = self.get(body)
        if seen is not None:
            return seen
        checked = accept(body, settings)
        return self.put(body, checked) if isinstance(checked, Accepted) else checked

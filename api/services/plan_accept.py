"""Admission of a ``POST /v1/plan`` body: parse, check the service's caps and the method, and key it.

The same 422 shape as ``/v1/solve`` (:mod:`.accept`): every error with its field, and one line a
person can read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipesched.solver import get_method
from pipesched.solver.core.errors import NotApplicableError
from pipesched.solver.core.io import InputError
from pipesched.solver.planning.cli import parse_module_names
from pipesched.solver.planning.key import plan_key

from ..models import PlanRequest
from ..settings import Settings
from .accept import budgets, over_caps, parse
from .replies import Reply, refusal_reply


@dataclass(frozen=True)
class AcceptedPlan:
    """A plan request that passed validation, the caps and the method check."""

    key: str
    method: str
    model_json: str
    cluster_json: str
    module_names: str | None
    time_limit_s: float
    wait_s: float


def accept_plan(body: bytes, settings: Settings) -> AcceptedPlan | Reply:
    """Parse and check a request body: the request to act on, or the 422 saying what is wrong."""
    req = parse(PlanRequest, body)
    if isinstance(req, Reply):
        return req
    time_limit_s, wait_s = budgets(req, settings)
    c = req.cluster  # checked as the problems it induces would be
    m = max(c.microbatch_choices())
    detail = over_caps([
        ("service_max_devices", c.devices, settings.service_max_devices, ["cluster", "devices"]),
        ("service_max_microbatches", m, settings.service_max_microbatches, ["cluster", "microbatches"]),
        ("service_max_stages_per_device", c.stages_per_device, settings.service_max_stages_per_device,
         ["cluster", "stages_per_device"]),
        ("service_max_ops", c.num_stages * m * (3 if c.split_backward else 2), settings.service_max_ops, ["cluster"]),
        ("max_time_limit_s", time_limit_s, settings.max_time_limit_s, ["time_limit_s"]),
    ], "the op count of its problems") + _field_errors(req)
    if detail:
        return refusal_reply(detail)
    return AcceptedPlan(key=plan_key(req.model, req.cluster, req.module_names), method=req.method,
                        model_json=req.model.model_dump_json(), cluster_json=req.cluster.model_dump_json(),
                        module_names=req.module_names, time_limit_s=time_limit_s, wait_s=wait_s)


def _field_errors(req: PlanRequest) -> list[dict[str, Any]]:
    """An unknown method or malformed module names, named by field."""
    out: list[dict[str, Any]] = []
    try:
        get_method(req.method)
    except NotApplicableError as e:
        out.append({"loc": ["body", "method"], "msg": str(e), "type": "not_applicable"})
    if req.module_names is not None:
        try:
            parse_module_names(req.module_names)
        except InputError as e:
            out.append({"loc": ["body", "module_names"], "msg": str(e).removeprefix("--module-names "),
                        "type": "value_error"})
    return out

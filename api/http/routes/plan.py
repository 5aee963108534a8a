"""``POST /v1/plan``: a model and a cluster in, the planned split, recompute and schedule out.

Cached by the canonical key of (model, cluster, module names) with one slot per method, like
``/v1/solve`` (the rules: :mod:`pipesched.api.services.plan`).
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from ...models import PlanResponse
from ...services import plan as planning
from ...services.plan_accept import AcceptedPlan, accept_plan
from ..deps import BodyDep, ServiceDep, TokenRequired, respond
from .posts import POST_RESPONSES, request_body

router = APIRouter(tags=["plan"])


@router.post("/v1/plan", response_model=PlanResponse, dependencies=[TokenRequired],
             openapi_extra=request_body("PlanRequest"), responses=POST_RESPONSES)
async def plan(svc: ServiceDep, body: BodyDep) -> Response:
    """Plan a model on a cluster, or answer from the plan cache."""
    accepted = accept_plan(body, svc.settings)
    if not isinstance(accepted, AcceptedPlan):
        return respond(accepted)
    return respond(await planning.plan(svc.plans, accepted))

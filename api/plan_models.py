"""Request and response bodies of ``POST /v1/plan`` (pydantic: this is the wire)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from pipesched.solver.planning import Cluster, Model, Plan
from pipesched.solver.planning.exports import TORCHTITAN_NAMES, TORCHTITAN_VERSION


class PlanRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: Model
    cluster: Cluster
    method: str = Field("auto", min_length=1, max_length=64,
                        description="The schedule method every candidate split is solved with (GET /v1/methods).")
    time_limit_s: float | None = Field(
        None, gt=0, allow_inf_nan=False, description="Time for the whole plan; the service default when omitted.")
    wait_s: float | None = Field(
        None, ge=0, allow_inf_nan=False,
        description="How long to wait for the plan before returning 202 with a job (capped by the service).")
    module_names: str | None = Field(
        None, max_length=1000,
        description=f"torchtitan names INPUT;BLOCK;OUTPUT; default {TORCHTITAN_NAMES!r} "
                    f"(torchtitan {TORCHTITAN_VERSION}'s Llama names).")


class PlanResponse(BaseModel):
    key: str = Field(..., description="Cache key: sha256 of the canonical model, cluster and module names.")
    cached: bool = Field(..., description="True when served from the cache without planning.")
    plan: Plan

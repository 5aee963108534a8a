"""Request and response bodies of the service, ``/v1/solve`` and ``/v1/plan`` (pydantic: this is the wire)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pipesched.solver.core.problem import Problem
from pipesched.solver.core.schedule import Schedule
from pipesched.solver.planning import Cluster, Model, Plan
from pipesched.solver.planning.exports import TORCHTITAN_NAMES, TORCHTITAN_VERSION

KEY_PATTERN = "^[0-9a-f]{64}$"


class SolveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    problem: Problem
    method: str = Field("auto", min_length=1, max_length=64, description="A method from GET /v1/methods.")
    time_limit_s: float | None = Field(
        None, gt=0, allow_inf_nan=False, description="Solver time budget; the service default when omitted."
    )
    wait_s: float | None = Field(
        None, ge=0, allow_inf_nan=False,
        description="How long to wait for the answer before returning 202 with a job (capped by the service).",
    )


class SolveResponse(BaseModel):
    key: str = Field(..., description="Cache key: sha256 of the canonical problem.")
    cached: bool = Field(..., description="True when served from the cache without solving.")
    schedule: Schedule
    warnings: list[str] = Field(default_factory=list, description=(
        "What the reader should know, e.g. no memory.limit was set and the schedule holds more than 1F1B would."))


class JobAccepted(BaseModel):
    job: str
    key: str
    state: Literal["queued", "running", "done", "failed"]


class JobStatus(BaseModel):
    job: str
    key: str
    method: str
    state: Literal["queued", "running", "done", "failed"]
    error: str | None = None
    created_at: float
    finished_at: float | None = None
    result: SolveResponse | None = None


class EntryOut(BaseModel):
    key: str
    method: str = Field(..., description="The method the entry was requested with (its cache slot).")
    status: str
    objective_value: float | None
    lower_bound: float | None
    budget_s: float = Field(..., description="The largest time_limit_s a solve of this entry was given.")
    solve_time_s: float = Field(..., description="Solver time spent on this entry over all its improvements.")
    created_at: float
    updated_at: float
    schedule: Schedule


class MethodOut(BaseModel):
    name: str
    summary: str


class ErrorItem(BaseModel):
    loc: list[str | int]
    msg: str
    type: str
    cap: str | None = None
    limit: float | None = None


class ValidationErrorBody(BaseModel):
    detail: list[ErrorItem]
    error: str = Field(..., description="The same, as one line a person can read.")


class ErrorBody(BaseModel):
    detail: str
    cap: str | None = None
    limit: float | None = None
    extra: dict[str, Any] | None = None


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
        description=f"torchtitan names INPUT;BLOCK;OUTPUT (comma-separated input and output names; BLOCK holds "
                    f"{{i}}, the block's index, and no other braces); default {TORCHTITAN_NAMES!r} "
                    f"(torchtitan {TORCHTITAN_VERSION}'s Llama names).")


class PlanResponse(BaseModel):
    key: str = Field(..., description="Cache key: sha256 of the canonical model, cluster and module names.")
    cached: bool = Field(..., description="True when served from the cache without planning.")
    plan: Plan

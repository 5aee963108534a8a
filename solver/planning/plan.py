"""The answer of planning (wire format): the split, its recompute choice, the Problem it induces, the
schedule, how far from the best split it can be, and what the hand rules would have given."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pipesched.solver import Problem, Schedule

from .model import Cluster, Model

PlanStatus = Literal["optimal", "feasible", "infeasible", "timeout"]


class PlanStage(BaseModel):
    """Stage ``stage`` runs expanded layers ``[layers[0], layers[1])`` on ``device``; with ``recompute``
    it checkpoints every recomputable layer, or only ``recompute_layers`` when they are listed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stage: int
    device: int
    layers: tuple[int, int]
    recompute: bool = False
    recompute_layers: list[int] | None = Field(None, description="Per-layer recompute: the expanded indices "
                                               "recomputed (null: all the stage's recomputable layers).")


class Baseline(BaseModel):
    """A hand rule's split scheduled by the same method (``step_time`` None when it does not fit)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    stages: list[PlanStage] = Field(default_factory=list)
    step_time: float | None = None
    status: PlanStatus = "infeasible"
    reason: str | None = None


class Exports(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    megatron_layout: str = Field(..., description="Megatron-LM --pipeline-model-parallel-layout.")
    torchtitan_module_fqns: list[list[str]] = Field(..., description="torchtitan module_fqns_per_model_part.")
    torch_csv: str = Field("", description="The schedule as torch.distributed.pipelining's compute-only CSV "
                           "(written by `pipesched plan`; from Python: pipesched.solver.formats.torch_csv."
                           "to_torch_csv(plan.schedule), a layer above planning).")


class Plan(BaseModel):
    """A planned model: ``status`` is ``optimal`` only when ``step_time`` meets ``lower_bound``, a bound
    valid over every split and recompute choice (``lower_bound_derivation`` says which term)."""

    model_config = ConfigDict(extra="forbid")

    model: Model
    cluster: Cluster
    method: str
    status: PlanStatus
    reason: str | None = None
    microbatches: int | None = None
    stages: list[PlanStage] = Field(default_factory=list)
    problem: Problem | None = None
    schedule: Schedule | None = None
    step_time: float | None = None
    lower_bound: float | None = None
    lower_bound_derivation: str = ""
    peak_memory: list[float] = Field(default_factory=list, description="Per device: static + activations, "
                                     "recompute transients included.")
    baselines: list[Baseline] = Field(default_factory=list)
    exports: Exports | None = None
    candidates: int = Field(0, description="Distinct splits scheduled.")
    wall_cut: bool = Field(False, description="The wall-clock net stopped the search before its nominal "
                           "budget ran out (a machine much slower than assumed): the plan may differ on an idle one.")
    solves_cut: int = Field(0, description="Solves whose method's own wall-clock net cut a phase, also when "
                            "run once more (or with no room left for that): their answers, and so the plan, "
                            "may differ on an idle machine.")
    solve_time_s: float = 0.0

    @property
    def gap(self) -> float | None:
        if self.step_time is None or self.lower_bound is None or self.step_time <= 0:
            return None
        return max(0.0, (self.step_time - self.lower_bound) / self.step_time)

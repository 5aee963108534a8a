"""The canonical schedule: every op with its device and exact start/end time.

A schedule leaves the library only through :func:`pipesched.solver.timing.finalize.finalize`, which
recomputes its figures and runs the validator, so the numbers in this object can be trusted.

``bubble_ratio`` is the idle fraction of the objective window summed over devices:
``1 - total_work / (devices * objective_value)``. With uniform stages and ``v = 1`` under the
``stage_span`` objective this is the zero-bubble paper's ``1 - m(F+B+W) / stage_span``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .instance import OpId
from .problem import Problem

Status = Literal["optimal", "feasible", "infeasible", "timeout"]

#: Per-device op order: ``order[d]`` lists the ops device ``d`` runs, first to last.
Order = list[list[OpId]]


class ScheduledOp(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    device: int
    stage: int
    kind: Literal["F", "B", "W"]
    microbatch: int
    start: float
    end: float

    @property
    def id(self) -> OpId:
        return OpId(self.kind, self.stage, self.microbatch)


def execution_key(op: ScheduledOp) -> tuple[float, float]:
    """The one per-device op order: by start, then end; a stable sort keeps equal-time (zero-cost) ops
    in the order the method ran them, which is the order memory was checked in."""
    return (op.start, op.end)


def _absent(value: object) -> bool:
    return value is None


class TimedSync(BaseModel):
    """A stage's gradient sync on its device's sync lane (``costs.grad_sync``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: int
    stage: int
    start: float
    end: float


class TimedStep(BaseModel):
    """A device's optimizer step (``costs.optimizer``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: int
    start: float
    end: float


class Schedule(BaseModel):
    """A solved (or proven infeasible) problem. Serialised exactly like this by CLI and service.

    With ``costs.grad_sync`` or ``costs.optimizer`` set, the step ends after the ops
    (:mod:`pipesched.solver.core.step`): ``makespan`` is the step's end (``step_end``), ``pipeline_end``
    the last op's, and ``syncs`` and ``optimizer_steps`` give the tail; without, those four are absent.
    """

    model_config = ConfigDict(extra="forbid")

    problem: Problem
    method: str
    status: Status
    reason: str | None = Field(None, description="Why the problem is infeasible or no schedule was found.")
    makespan: float | None = None
    objective_value: float | None = None
    lower_bound: float | None = None
    peak_memory: list[float] = Field(default_factory=list)
    bubble_ratio: float | None = None
    solve_time_s: float = 0.0
    ops: list[ScheduledOp] = Field(default_factory=list)
    # written only with a step tail, so schedules of problems without one read as they always did
    pipeline_end: float | None = Field(None, exclude_if=_absent,
                                       description="When the last op ends (only with a step tail).")
    step_end: float | None = Field(None, exclude_if=_absent,
                                   description="When the last optimizer step ends (only with a step tail).")
    syncs: list[TimedSync] | None = Field(None, exclude_if=_absent,
                                          description="Each stage's gradient sync (only with a step tail).")
    optimizer_steps: list[TimedStep] | None = Field(None, exclude_if=_absent,
                                                    description="Each device's optimizer step (only with a step tail).")

    @property
    def has_ops(self) -> bool:
        return bool(self.ops)

    def order(self) -> Order:
        """Per-device op order: by start, then end; zero-length ops at one instant keep their list order.

        List order breaks ties because it carries the order the method ran them in (an id order could
        put a B before its own F, or an acquisition before a release, when costs are 0).
        """
        per: list[list[ScheduledOp]] = [[] for _ in range(self.problem.devices)]
        for op in self.ops:
            per[op.device].append(op)
        return [[o.id for o in sorted(ops, key=execution_key)] for ops in per]

    @property
    def gap(self) -> float | None:
        """Relative gap between the objective and the proven lower bound."""
        if self.objective_value is None or self.lower_bound is None or self.objective_value <= 0:
            return None
        return max(0.0, (self.objective_value - self.lower_bound) / self.objective_value)

"""The canonical description of a pipeline-scheduling problem (wire format).

A model of ``S = p * v`` stages, numbered in model order, is spread over ``p`` devices.
Every stage ``s`` and microbatch ``i`` has a forward op ``F(s, i)``, an input-gradient
backward ``B(s, i)`` and, with ``split_backward``, a weight-gradient backward ``W(s, i)``.

Under ``placement: "dual"`` (DualPipe, docs/dualpipe.md) the model has ``p`` stages held twice:
stage ids ``0..p-1`` are the downward copy (stage ``k`` on device ``k``), ``p..2p-1`` the upward
copy (id ``p + k`` is model stage ``k``, on device ``p - 1 - k``); microbatches ``i < dual_split``
run through the downward copy only, the others through the upward one. Per-stage lists then give
one entry per *model* stage (``p`` of them) and both copies read them.
This module only describes and checks a problem; :mod:`pipesched.solver.core.instance` turns it
into the plain arrays the solvers work on.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from .limits import above_one_f_one_b, one_f_one_b_peaks, relative_factor, resolve
from .tolerance import REL_TOL

Number = float
PerStage = float | list[float]


#: Largest magnitude accepted for a cost, the comm latency, a memory delta or limit (and the planning
#: model's sizes): far beyond any real model (1e12 ms is 30 years), small enough that sums over the
#: op cap stay exact to about 1e-4 relative in float64 and scaled integer models stay in int64.
MAX_MAGNITUDE = 1e12
#: Smallest non-zero magnitude: below any real cost or size (a femtosecond in ms, a byte in GiB); a
#: subnormal one made ratios such as limit / delta overflow to infinity in the bounds and scaling.
MIN_MAGNITUDE = 1e-9


@dataclass(frozen=True)
class ProblemCaps:
    """Upper bounds that keep a request from asking for a billion ops.

    Defaults come from the environment (``PIPESCHED_MAX_DEVICES``, ``PIPESCHED_MAX_MICROBATCHES``,
    ``PIPESCHED_MAX_STAGES_PER_DEVICE``, ``PIPESCHED_MAX_OPS``) so a deployment can tighten them
    without code; the service passes its own caps through the validation context.
    """

    max_devices: int = 1024
    max_microbatches: int = 4096
    max_stages_per_device: int = 64
    max_ops: int = 2_000_000

    @classmethod
    def from_env(cls) -> ProblemCaps:
        # Every Problem validation asks for the caps (the service's cache-hit path included), so
        # parse them once per distinct environment rather than on each call.
        return _caps_from_raw(tuple(os.environ.get(name) for name in _CAP_VARIABLES))


#: Environment variables behind ProblemCaps, in field order.
_CAP_VARIABLES = (
    "PIPESCHED_MAX_DEVICES",
    "PIPESCHED_MAX_MICROBATCHES",
    "PIPESCHED_MAX_STAGES_PER_DEVICE",
    "PIPESCHED_MAX_OPS",
)


@functools.lru_cache(maxsize=16)
def _caps_from_raw(raw: tuple[str | None, ...]) -> ProblemCaps:
    base = ProblemCaps()
    defaults = (base.max_devices, base.max_microbatches, base.max_stages_per_device, base.max_ops)
    return ProblemCaps(*(int(value) if value else default for value, default in zip(raw, defaults, strict=True)))


class Costs(BaseModel):
    """Op durations in any time unit (ms, s, ...); schedules report times in the same unit."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    forward: PerStage = 1.0
    backward_input: PerStage = 1.0
    backward_weight: PerStage = 1.0
    comm: Number | list[Number] = Field(0.0, description=(
        "Point-to-point latency between consecutive stages on different devices: one number, or one per "
        "model stage boundary (S - 1 entries, entry k between stage k and k + 1; p - 1 under 'dual')."))
    overlap_fb: PerStage | None = Field(None, description=(
        "Overlapped F&B (DualPipe): a device may run one F and one B as one combined op lasting "
        "max(F, B, overlap_fb[stage of the F] * (F + B)); each factor in (0, 1]; absent: no overlap."))
    grad_sync: PerStage = Field(0.0, description=(
        "Time to synchronise a stage's gradients over its data-parallel group (one number, or one per model "
        "stage). It starts once the stage's last W ends (its last B with a fused backward), on its device's "
        "one sync lane, one sync at a time; the step then ends with the optimizer."))
    optimizer: Number | list[Number] = Field(0.0, description=(
        "Time of the optimizer step (one number, or one per device): it starts once the device's syncs and "
        "ops are done. With grad_sync or optimizer set, the objective is the step's end."))


class Memory(BaseModel):
    """Activation-memory deltas per op (any unit) and the per-device cap.

    A positive delta takes effect when the op starts, a negative one when it ends.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    forward: PerStage = 1.0
    backward_input: PerStage = 0.0
    backward_weight: PerStage = -1.0
    backward_input_transient: PerStage = Field(0.0, description=(
        "Extra memory live only while a stage's B runs (>= 0; e.g. the forward activations activation "
        "checkpointing re-materialises): taken at B's start, given back at its end."))
    limit: Number | list[Number] | str | None = Field(None, description=(
        "Per-device cap: null (none), one number, one per device, or a multiple of 1F1B's per-device peak "
        "such as '1.5x1f1b', resolved into one number per device when the problem is validated."))

    @field_validator("limit")
    @classmethod
    def _limit_text(cls, value: Number | list[Number] | str | None) -> Number | list[Number] | str | None:
        if isinstance(value, str):
            relative_factor(value)  # the accepted form, or a message saying what it is
        return value


class Units(BaseModel):
    """Names of the time and memory units the numbers are in (labels only: solving ignores them).

    The solver works in "any unit"; a problem made from a model (``pipesched plan``, the cost model)
    says which, so charts and summaries can label their axes. Not part of the cache key.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    time: str | None = Field(None, max_length=16, description="e.g. 'ms'; labels the time axis.")
    memory: str | None = Field(None, max_length=16, description="e.g. 'GiB'; labels memory figures.")

    @field_validator("time", "memory")
    @classmethod
    def _printable(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or not value.isprintable()):
            raise ValueError("must be a short printable name such as 'ms' or 'GiB'")
        return value


class Problem(BaseModel):
    """One pipeline-scheduling problem; the single representation shared by every component."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    devices: int = Field(..., description="p: number of pipeline devices (ranks).")
    microbatches: int = Field(..., description="m: microbatches per training step.")
    stages_per_device: int = Field(1, description="v: model chunks held by each device.")
    placement: Literal["loop", "v", "dual"] = Field(
        "loop", description=(
            "'loop': stage s on device s % p; 'v' (v = 2): V-shape, s < p on s, else 2p-1-s; "
            "'dual' (v = 2, p even): DualPipe's two copies of a p-stage model, one per direction."),
    )
    dual_split: int | None = Field(
        None, description="'dual' only: microbatches 0..dual_split-1 flow down (device 0 -> p-1), the rest "
        "up; default m // 2.")
    split_backward: bool = Field(True, description="Split backward into B (input grad) and W (weight grad).")
    costs: Costs = Field(default_factory=Costs)
    memory: Memory = Field(default_factory=Memory)
    objective: Literal["makespan", "stage_span"] = "makespan"
    units: Units | None = Field(None, description="Optional names of the time and memory units (labels only).")

    @property
    def num_stages(self) -> int:
        """Stage ids ``S = p * v`` (under "dual": ``2p``, the two copies of the ``p``-stage model)."""
        return self.devices * self.stages_per_device

    @property
    def num_model_stages(self) -> int:
        """Entries of a per-stage list: ``S``, or ``p`` under "dual" (both copies share them)."""
        return self.devices if self.placement == "dual" else self.num_stages

    @property
    def down_microbatches(self) -> int:
        """Microbatches through the downward copy: ``dual_split`` (default ``m // 2``); all of them
        unless the placement is "dual"."""
        if self.placement != "dual":
            return self.microbatches
        return self.microbatches // 2 if self.dual_split is None else self.dual_split

    @property
    def num_ops(self) -> int:
        kinds = 3 if self.split_backward else 2
        return kinds * self.num_model_stages * self.microbatches

    def one_f_one_b_peaks(self) -> list[float]:
        """1F1B's peak memory per device for this model (:mod:`pipesched.solver.core.limits`)."""
        s, mem = self.num_model_stages, self.memory
        deltas = [x if isinstance(x, list) else [x] * s for x in (mem.forward, mem.backward_input, mem.backward_weight)]
        return _one_f_one_b_reference(self.devices, self.microbatches, self.placement, self.split_backward, deltas)

    def memory_warning(self, peaks: Sequence[float]) -> str | None:
        """With no limit, why an answer's ``peaks`` may surprise (above 1F1B's somewhere), else None."""
        if self.memory.limit is not None or len(peaks) != self.devices:
            return None
        return above_one_f_one_b(peaks, self.one_f_one_b_peaks())

    @model_validator(mode="before")
    @classmethod
    def _resolve_relative_limit(cls, data: Any) -> Any:
        """``memory.limit: "1.5x1f1b"`` -> one number per device, before anything else sees it."""
        if not isinstance(data, dict):
            return data
        memory = data.get("memory")
        mem = memory.model_dump() if isinstance(memory, Memory) else memory
        if not isinstance(mem, dict) or not isinstance(mem.get("limit"), str):
            return data
        k = relative_factor(mem["limit"])
        try:
            peaks = _raw_peaks(data, mem)
        except (ValueError, TypeError, KeyError, OverflowError):
            return data  # the after-validator names what is wrong with the fields it needs
        return {**data, "memory": {**mem, "limit": resolve(k, peaks)}}

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> Problem:
        caps = (info.context or {}).get("caps") if info is not None else None
        caps = caps if isinstance(caps, ProblemCaps) else ProblemCaps.from_env()
        errors = list(problem_errors(self, caps))
        if not errors and isinstance(self.memory.limit, str):
            errors.append(f"memory.limit {self.memory.limit!r} could not be resolved against 1F1B's peak")
        if errors:
            raise ValueError("; ".join(errors))
        return self


def _raw_peaks(data: dict[str, Any], mem: dict[str, Any]) -> list[float]:
    """1F1B's peaks from unvalidated fields; raises on anything the validators will reject anyway."""
    p, m = int(data["devices"]), int(data["microbatches"])
    v = int(data.get("stages_per_device", 1))
    stages = p * v
    if min(p, m, v) < 1 or stages > ProblemCaps.from_env().max_devices * 64:
        raise ValueError("sizes out of range")
    placement = data.get("placement", "loop")
    if placement in ("v", "dual") and v != 2:
        raise ValueError("v and dual placements need v = 2")
    if placement == "dual":
        stages = p
    defaults = {"forward": 1.0, "backward_input": 0.0, "backward_weight": -1.0}
    deltas = []
    for name, default in defaults.items():
        x = mem.get(name, default)
        values = [float(y) for y in x] if isinstance(x, list) else [float(x)] * stages
        if len(values) != stages or not all(math.isfinite(y) for y in values):
            raise ValueError(f"memory.{name}")
        deltas.append(values)
    return _one_f_one_b_reference(p, m, str(placement), bool(data.get("split_backward", True)), deltas)


def _one_f_one_b_reference(p: int, m: int, placement: str, split: bool, deltas: list[list[float]]) -> list[float]:
    """1F1B's per-device peaks; under "dual" the largest of them on every device.

    Why the largest: a dual device holds two model stages, one per direction, and DeepSeek's table
    compares DualPipe's activations (``p + 1`` microbatches per device) with 1F1B's worst device
    (``p``), the same model run by 1F1B on the same ``p`` devices.
    """
    if placement == "dual":
        peak = max(one_f_one_b_peaks(p, m, "loop", split, *deltas))
        return [peak] * p
    return one_f_one_b_peaks(p, m, placement, split, *deltas)


def _positive_int(name: str, value: int, cap: int) -> str | None:
    if value < 1:
        return f"{name} must be >= 1 (got {value})"
    if value > cap:
        return f"{name} must be <= {cap} (got {value}); raise the cap if you really need it"
    return None


def _per_stage(name: str, value: PerStage, stages: int, *, non_negative: bool,
               dual: bool = False) -> tuple[list[str], list[float]]:
    values = list(value) if isinstance(value, list) else [value] * stages
    if isinstance(value, list) and len(values) != stages:
        what = (f"the dual placement's model has p = devices = {stages} stages (one entry per model stage, "
                "shared by both copies)" if dual else f"the model has S = devices * stages_per_device = {stages} stages")
        return [f"{name} has {len(values)} entries but {what}"], []
    errors: list[str] = []
    for s, x in enumerate(values if isinstance(value, list) else [value]):
        where = f"{name}[{s}]" if isinstance(value, list) else name
        if (e := number_error(where, x, non_negative=non_negative)) is not None:
            errors.append(e)
    return errors, values


def number_error(where: str, x: float, *, non_negative: bool) -> str | None:
    """Why ``x`` is not an acceptable cost, delta or limit (finite, 0 or ``MIN_MAGNITUDE <= |x| <=
    MAX_MAGNITUDE``), or None."""
    if not math.isfinite(x) or abs(x) > MAX_MAGNITUDE:
        return f"{where} must be a finite number of magnitude <= {MAX_MAGNITUDE:g} (got {x:g})"
    if 0 < abs(x) < MIN_MAGNITUDE:
        return f"{where} must be 0 or of magnitude >= {MIN_MAGNITUDE:g} (got {x:g})"
    if non_negative and x < 0:
        return f"{where} must be >= 0 (got {x:g})"
    return None


def problem_errors(problem: Problem, caps: ProblemCaps) -> list[str]:
    """Every reason ``problem`` is not acceptable, each naming the field and the value."""
    errors = [
        e
        for e in (
            _positive_int("devices", problem.devices, caps.max_devices),
            _positive_int("microbatches", problem.microbatches, caps.max_microbatches),
            _positive_int("stages_per_device", problem.stages_per_device, caps.max_stages_per_device),
        )
        if e
    ]
    if errors:
        return errors
    if problem.placement == "v" and problem.stages_per_device != 2:
        errors.append(f"placement 'v' needs stages_per_device = 2 (got {problem.stages_per_device})")
    errors += _dual_errors(problem)
    if errors:
        return errors
    if problem.num_ops > caps.max_ops:
        errors.append(
            f"the problem has {problem.num_ops} ops (kinds x devices x stages_per_device x microbatches), "
            f"more than the cap of {caps.max_ops}"
        )
        return errors
    stages, dual = problem.num_model_stages, problem.placement == "dual"
    costs = {}
    for field in ("forward", "backward_input", "backward_weight"):
        errs, costs[field] = _per_stage(f"costs.{field}", getattr(problem.costs, field), stages, non_negative=True,
                                        dual=dual)
        errors += errs
    errors += _comm_errors(problem.costs.comm, stages)
    errors += _per_stage("costs.grad_sync", problem.costs.grad_sync, stages, non_negative=True, dual=dual)[0]
    errors += _per_device("costs.optimizer", problem.costs.optimizer, problem.devices)
    errors += _per_stage("memory.backward_input_transient", problem.memory.backward_input_transient, stages,
                         non_negative=True, dual=dual)[0]
    if problem.costs.overlap_fb is not None:
        overlap = problem.costs.overlap_fb
        errs, _ = _per_stage("costs.overlap_fb", overlap, stages, non_negative=True, dual=dual)
        errors += errs
        if not errs:
            listed = isinstance(overlap, list)
            errors += [f"costs.overlap_fb{f'[{s}]' if listed else ''} must be in (0, 1], a share of F + B (got {x:g})"
                       for s, x in enumerate(overlap if isinstance(overlap, list) else [overlap]) if not 0 < x <= 1]
    deltas = {}
    for field in ("forward", "backward_input", "backward_weight"):
        errs, deltas[field] = _per_stage(f"memory.{field}", getattr(problem.memory, field), stages,
                                         non_negative=False, dual=dual)
        errors += errs
    if all(len(d) == stages for d in deltas.values()):
        for s in range(stages):
            parts = [deltas[f][s] for f in ("forward", "backward_input", "backward_weight")]
            total = sum(parts)
            scale = max(1.0, *(abs(x) for x in parts))
            if abs(total) > REL_TOL * scale:
                errors.append(
                    f"memory deltas of stage {s} sum to {total:g}, not 0 "
                    f"(forward {parts[0]:g} + backward_input {parts[1]:g} + backward_weight {parts[2]:g}): "
                    "activations would leak"
                )
                break
    limit = problem.memory.limit
    if isinstance(limit, list) and len(limit) != problem.devices:
        errors.append(f"memory.limit has {len(limit)} entries but there are {problem.devices} devices")
    elif limit is not None and not isinstance(limit, str):  # a str is a '1.5x1f1b' left unresolved by
        for d, x in enumerate(limit if isinstance(limit, list) else [limit]):  # an error reported above
            where = f"memory.limit[{d}]" if isinstance(limit, list) else "memory.limit"
            if (e := number_error(where, x, non_negative=True)) is not None:
                errors.append(e)
    return errors


def _per_device(name: str, value: float | list[float], devices: int) -> list[str]:
    """A non-negative number, or one per device."""
    if isinstance(value, list) and len(value) != devices:
        return [f"{name} has {len(value)} entries but there are {devices} devices"]
    values = value if isinstance(value, list) else [value]
    return [e for d, x in enumerate(values)
            if (e := number_error(f"{name}[{d}]" if isinstance(value, list) else name, x, non_negative=True))]


def _comm_errors(comm: float | list[float], stages: int) -> list[str]:
    """``costs.comm``: one latency, or one per boundary between consecutive model stages."""
    if not isinstance(comm, list):
        e = number_error("costs.comm", comm, non_negative=True)
        return [e] if e else []
    if len(comm) != max(stages - 1, 0):
        return [f"costs.comm has {len(comm)} entries but the model's {stages} stages have {stages - 1} boundaries "
                "(entry k between stage k and k + 1), or give one number"]
    return [e for k, x in enumerate(comm) if (e := number_error(f"costs.comm[{k}]", x, non_negative=True))]


def _dual_errors(problem: Problem) -> list[str]:
    """Why the dual placement fields are not acceptable: "dual" needs v = 2, p even, m >= 2 and a split
    in ``[0, m]``; ``dual_split`` means nothing for the other placements."""
    if problem.placement != "dual":
        if problem.dual_split is not None:
            return [f"dual_split is only meaningful with placement 'dual' (got placement {problem.placement!r})"]
        return []
    errors = []
    if problem.stages_per_device != 2:
        errors.append(f"placement 'dual' needs stages_per_device = 2, one chunk per direction "
                      f"(got {problem.stages_per_device})")
    if problem.devices % 2:
        errors.append(f"placement 'dual' needs an even number of devices (got devices = {problem.devices})")
    if problem.microbatches < 2:
        errors.append(f"placement 'dual' needs microbatches >= 2, at least one per direction "
                      f"(got {problem.microbatches})")
    split = problem.dual_split
    if split is not None and not 0 <= split <= problem.microbatches:
        errors.append(f"dual_split must be in [0, microbatches = {problem.microbatches}] (got {split})")
    return errors

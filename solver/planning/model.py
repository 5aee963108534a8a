"""The wire format of a network and a cluster, the input of planning (issue 10).

A :class:`Model` lists a network's layers in model order with per-microbatch costs, activation-memory
deltas (the same event semantics as :class:`~pipesched.solver.Problem`: a positive delta is held from an
op's start, a negative one released at its end, the three sum to 0), the memory a layer holds whatever the
schedule (``static``: weights, gradients, optimizer state) and the size of the activation it sends on.
A :class:`Cluster` says how many devices hold the pipeline, how much memory each has and how fast the
link between them is. Planning turns the pair into a :class:`~pipesched.solver.Problem` per candidate
split; this module only describes and checks them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..core.problem import (  # one range for every cost, delta, size and memory
    MAX_MAGNITUDE,
    number_error,
)


class LayerMemory(BaseModel):
    """Activation-memory deltas of one layer's F, B and W for one microbatch (they sum to 0)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    forward: float = 0.0
    backward_input: float = 0.0
    backward_weight: float = 0.0

    def errors(self, where: str) -> list[str]:
        parts = (self.forward, self.backward_input, self.backward_weight)
        errs = [e for name, x in zip(("forward", "backward_input", "backward_weight"), parts, strict=True)
                if (e := number_error(f"{where}.{name}", x, non_negative=False))]
        total, scale = sum(parts), max(1.0, *(abs(x) for x in parts))
        if not errs and abs(total) > 1e-9 * scale:
            errs.append(f"{where} deltas sum to {total:g}, not 0: activations would leak")
        return errs


class Recompute(BaseModel):
    """A layer's deltas under activation checkpointing: its B re-runs its F first (B costs
    ``backward_input + forward``) and, while it does, the full ``memory.forward`` is live again."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory: LayerMemory


class LayerComm(BaseModel):
    """The part of a layer's F and B time that is collective communication inside the layer (an
    expert-parallel all-to-all), already included in ``forward`` / ``backward_input``. Another
    microbatch's compute can hide it when an F and a B run as one overlapped op (DualPipe), so the
    induced Problem gets ``costs.overlap_fb`` from it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    forward: float = Field(0.0, ge=0.0, le=MAX_MAGNITUDE)
    backward_input: float = Field(0.0, ge=0.0, le=MAX_MAGNITUDE)


class Layer(BaseModel):
    """One layer (or ``repeat`` identical ones) in model order; times are per microbatch."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(..., min_length=1, max_length=200)
    repeat: int = Field(1, ge=1, le=100_000, description="Expand into this many identical layers.")
    forward: float = 0.0
    backward_input: float = 0.0
    backward_weight: float = 0.0
    memory: LayerMemory = Field(default_factory=LayerMemory)
    static: float = Field(0.0, description="Memory held whatever the schedule: weights, grads, optimizer state.")
    output: float = Field(0.0, description="Size of the activation sent to the next layer (and of its gradient).")
    recompute: Recompute | None = None
    parameters: int | None = Field(None, ge=0, le=10**15, description=(
        "Parameter count of one such layer in the full, unsharded model (a figure to check against your "
        "own count; planning does not read it)."))
    comm: LayerComm | None = Field(None, description=(
        "Collective time inside forward / backward_input that an overlapped F&B pair can hide."))
    gradient: float = Field(0.0, ge=0.0, le=MAX_MAGNITUDE, description=(
        "Size of one such layer's gradient on one device of its stage (memory unit): what the data-parallel "
        "sync of Cluster.data_parallel moves."))
    optimizer: float = Field(0.0, ge=0.0, le=MAX_MAGNITUDE, description=(
        "Memory one such layer's optimizer step reads and writes on one device (memory unit); the step takes "
        "it over Cluster.memory_bandwidth."))


class Units(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    time: str = "ms"
    memory: str = "GiB"


class Model(BaseModel):
    """A network as layers in model order (the first receives the data, the last computes the loss)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    layers: list[Layer] = Field(..., min_length=1)
    units: Units = Field(default_factory=Units)
    microbatch_size: int | None = Field(None, ge=1, le=1_000_000, description=(
        "Sequences per microbatch the costs were made for; a framework export takes its batch sizes from it."))
    sequence_length: int | None = Field(None, ge=1, le=100_000_000, description=(
        "Tokens per sequence the costs were made for (recorded with the plan, for the framework's config)."))

    @model_validator(mode="after")
    def _check(self) -> Model:
        errors: list[str] = []
        for k, layer in enumerate(self.layers):
            where = f"layers[{k}] ({layer.name})"
            for field in ("forward", "backward_input", "backward_weight", "static", "output"):
                e = number_error(f"{where}.{field}", getattr(layer, field), non_negative=True)
                if e:
                    errors.append(e)
            if layer.comm is not None:
                errors += [f"{where}.comm.{f}: {x:g} exceeds the layer's {f} {getattr(layer, f):g}"
                           for f, x in (("forward", layer.comm.forward), ("backward_input", layer.comm.backward_input))
                           if x > getattr(layer, f) * (1 + 1e-12)]
            errors += layer.memory.errors(f"{where}.memory")
            if layer.recompute is not None:
                errors += layer.recompute.memory.errors(f"{where}.recompute.memory")
        if sum(layer.repeat for layer in self.layers) > 100_000:
            errors.append("the model expands to more than 100000 layers")
        if errors:
            raise ValueError("; ".join(errors))
        return self

    def expanded(self) -> list[ExpandedLayer]:
        """Every layer once per ``repeat``, indexed in model order (the indices plans refer to)."""
        out: list[ExpandedLayer] = []
        for layer in self.layers:
            for r in range(layer.repeat):
                name = layer.name if layer.repeat == 1 else f"{layer.name}.{r}"
                out.append(ExpandedLayer.of(len(out), name, layer))
        return out


@dataclass(frozen=True)
class ExpandedLayer:
    """One expanded layer as plain numbers (planning's hot loops read these, not pydantic objects)."""

    index: int
    name: str
    kind: str  # the Layer's name before expansion: layers of one kind are identical
    forward: float
    backward_input: float
    backward_weight: float
    mem_forward: float
    mem_backward_input: float
    mem_backward_weight: float
    static: float
    output: float
    recompute: tuple[float, float, float] | None  # (forward, backward_input, backward_weight) deltas
    comm: tuple[float, float] | None = None  # hideable collective time inside (forward, backward_input)
    gradient: float = 0.0  # what the data-parallel sync moves
    optimizer: float = 0.0  # what the optimizer step streams

    @classmethod
    def of(cls, index: int, name: str, layer: Layer) -> ExpandedLayer:
        rc = layer.recompute.memory if layer.recompute is not None else None
        return cls(index, name, layer.name, layer.forward, layer.backward_input, layer.backward_weight,
                   layer.memory.forward, layer.memory.backward_input, layer.memory.backward_weight,
                   layer.static, layer.output,
                   (rc.forward, rc.backward_input, rc.backward_weight) if rc is not None else None,
                   (layer.comm.forward, layer.comm.backward_input) if layer.comm is not None else None,
                   layer.gradient, layer.optimizer)


class Link(BaseModel):
    """Point-to-point link between devices: a message of size x takes ``latency + x / bandwidth``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    latency: float = Field(0.0, ge=0.0, le=MAX_MAGNITUDE, description="Time units per message.")
    bandwidth: float | None = Field(None, gt=0.0, le=1e18,
                                    description="Memory units per time unit; null: sizes cost nothing.")

    def time(self, size: float) -> float:
        return self.latency + (size / self.bandwidth if self.bandwidth else 0.0)


class DataParallel(BaseModel):
    """The data-parallel replicas of the pipeline: each stage's gradients are synchronised over
    ``degree`` ranks on ``link`` at the end of a step (:meth:`sync_time`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    degree: int = Field(1, ge=1, le=1_000_000, description="Data-parallel ranks per stage (1: nothing to sync).")
    link: Link = Field(default_factory=Link, description="What one rank's collective traffic runs over.")
    zero: int = Field(0, ge=0, le=3, description="ZeRO stage: 0 and 1 all-reduce the gradients, 2 and 3 "
                      "reduce-scatter them (the parameters' all-gather overlaps the next step's forward).")

    def sync_time(self, size: float) -> float:
        """A ring collective of a stage's ``size`` of gradients over ``n = degree`` ranks: all-reduce
        ``2 (n - 1) / n · size / bandwidth + 2 (n - 1) · latency``; reduce-scatter (ZeRO 2, 3) half of it."""
        n = self.degree
        if n == 1:
            return 0.0
        steps = (n - 1) * (1 if self.zero >= 2 else 2)
        return steps / n * (size / self.link.bandwidth if self.link.bandwidth else 0.0) + steps * self.link.latency


class Cluster(BaseModel):
    """The devices that hold one pipeline, and the choices left to the planner."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    devices: int = Field(..., ge=1, le=1024)
    stages_per_device: int = Field(1, ge=1, le=64)
    placement: Literal["loop", "v"] = "loop"
    memory_per_device: float | list[float] | None = Field(
        None, description="Total memory per device (static + activations), in the model's memory unit.")
    link: Link = Field(default_factory=Link)
    microbatches: int | list[int] = Field(..., description="The microbatch count, or the counts to choose from.")
    objective: Literal["makespan", "stage_span"] = "makespan"
    split_backward: bool = True
    data_parallel: DataParallel | None = Field(None, description=(
        "Replicas of the pipeline: each stage's gradient sync ends the step (costs.grad_sync)."))
    devices_per_node: int | None = Field(None, ge=1, le=1024, description=(
        "Pipeline devices per node (device d on node d // devices_per_node); null: one node."))
    inter_node_link: Link | None = Field(None, description=(
        "The link between pipeline devices on different nodes (needs devices_per_node); null: link."))
    memory_bandwidth: float | None = Field(None, gt=0.0, le=1e18, description=(
        "Device memory bandwidth (memory units per time unit): the optimizer step streams its layers' "
        "optimizer memory at it (costs.optimizer); null: no optimizer step."))

    def boundary_link(self, a: int, b: int) -> Link:
        """The link between pipeline devices ``a`` and ``b``: the inter-node one across nodes."""
        per = self.devices_per_node
        if per is not None and self.inter_node_link is not None and a // per != b // per:
            return self.inter_node_link
        return self.link

    @model_validator(mode="after")
    def _check(self) -> Cluster:
        errors: list[str] = []
        if self.placement == "v" and self.stages_per_device != 2:
            errors.append(f"placement 'v' needs stages_per_device = 2 (got {self.stages_per_device})")
        counts = self.microbatches if isinstance(self.microbatches, list) else [self.microbatches]
        if not counts:
            errors.append("microbatches must be a number or a non-empty list")
        errors += [f"microbatches must be between 1 and 4096 (got {m})" for m in counts if not 1 <= m <= 4096]
        mem = self.memory_per_device
        if isinstance(mem, list) and len(mem) != self.devices:
            errors.append(f"memory_per_device has {len(mem)} entries but there are {self.devices} devices")
        elif mem is not None:
            for d, x in enumerate(mem if isinstance(mem, list) else [mem]):
                where = f"memory_per_device[{d}]" if isinstance(mem, list) else "memory_per_device"
                if e := number_error(where, x, non_negative=True):
                    errors.append(e)
        if self.inter_node_link is not None and self.devices_per_node is None:
            errors.append("inter_node_link needs devices_per_node (which devices share a node)")
        if errors:
            raise ValueError("; ".join(errors))
        return self

    @property
    def num_stages(self) -> int:
        return self.devices * self.stages_per_device

    def memory(self, device: int) -> float:
        mem = self.memory_per_device
        if mem is None:
            return math.inf
        return mem[device] if isinstance(mem, list) else mem

    def microbatch_choices(self) -> list[int]:
        return sorted(set(self.microbatches if isinstance(self.microbatches, list) else [self.microbatches]))

"""The Problem a split induces: stage sums, per-device limits, comm per boundary, recompute transients.

A *split* cuts the expanded layers into ``S = devices × stages_per_device`` non-empty contiguous
ranges, stage ``s`` holding ``[bounds[s], bounds[s+1])`` on device ``stage_device(s)`` (``s % p`` for
loop, the V fold for ``v``), with a recompute flag per stage.

- ``costs.comm`` has one entry per stage boundary: ``link.time(output of stage k's last layer)`` between
  stages ``k`` and ``k + 1`` on different devices (``inter_node_link`` across nodes), 0 where they share
  one (the V turn).
- ``costs.grad_sync`` and ``costs.optimizer`` (the step's tail, :func:`step_costs`) from the layers'
  ``gradient`` and ``optimizer`` sizes, the cluster's ``data_parallel`` and ``memory_bandwidth``.
- ``costs.overlap_fb`` is set when a layer carries ``comm`` (collectives an overlapped F&B pair can
  hide, :func:`overlap_factor`); otherwise it is absent and the Problem is what it always was.
- ``memory.backward_input_transient`` is, per recomputed stage, its layers' full ``memory.forward``: live
  again while that stage's B re-runs its forward. The validator and the reported peaks see it exactly;
  methods schedule under limits that keep each device's largest transient back
  (:mod:`pipesched.solver.core.transients`), so every method's schedule fits.

The limit of device d is ``memory_per_device[d] − Σ static(stages on d)``. The Problem carries the
model's ``units`` (labels only: charts and summaries name ms and GiB; the cache key ignores them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import ValidationError

from pipesched.solver import Costs, Memory, Problem, Units, stage_device

from .model import Cluster, ExpandedLayer
from .model import Units as ModelUnits
from .sums import StageSums, stage_sums, tidy


class InfeasibleSplit(ValueError):
    """No schedule can run this split (or model) on this cluster; the message names device and layer."""


@dataclass(frozen=True)
class Split:
    """Stage ``s`` holds expanded layers ``[bounds[s], bounds[s+1])``; ``recompute[s]`` checkpoints it:
    every recomputable layer of it, or when ``partial[s]`` is a number, that many of them (per-layer
    granularity, in :func:`.sums.recompute_order`). ``partial`` is None when no stage is partial."""

    bounds: tuple[int, ...]
    recompute: tuple[bool, ...]
    partial: tuple[int | None, ...] | None = None

    @classmethod
    def of(cls, bounds: list[int] | tuple[int, ...], recompute: list[bool] | tuple[bool, ...] | None = None,
           partial: list[int | None] | tuple[int | None, ...] | None = None) -> Split:
        rc = tuple(recompute) if recompute is not None else (False,) * (len(bounds) - 1)
        counts = None
        if partial is not None:  # a count only where the stage recomputes; all None is no partial at all
            counts = tuple(c if f and c is not None else None for f, c in zip(rc, partial, strict=True))
            counts = counts if any(c is not None for c in counts) else None
        return cls(tuple(bounds), rc, counts)

    def count(self, stage: int) -> int | None:
        """How many layers stage ``stage`` recomputes when not all (None: all, or it does not)."""
        return self.partial[stage] if self.partial is not None else None

    def counts(self) -> list[int | None]:
        return [self.count(s) for s in range(self.num_stages)]

    @property
    def num_stages(self) -> int:
        return len(self.bounds) - 1

    def layers(self, stage: int) -> range:
        return range(self.bounds[stage], self.bounds[stage + 1])

    def errors(self, num_layers: int, num_stages: int) -> list[str]:
        """Why this is not a split of ``num_layers`` layers into ``num_stages`` non-empty stages."""
        b = self.bounds
        errs = []
        if len(b) != num_stages + 1:
            errs.append(f"a split into {num_stages} stages needs {num_stages + 1} bounds (got {len(b)})")
        elif b[0] != 0 or b[-1] != num_layers:
            errs.append(f"bounds must run from 0 to the {num_layers} layers (got {b[0]} .. {b[-1]})")
        errs += [f"stage {s} is empty or reversed: layers [{b[s]}, {b[s + 1]})"
                 for s in range(len(b) - 1) if b[s + 1] <= b[s]]
        if len(self.recompute) != len(b) - 1:
            errs.append(f"recompute has {len(self.recompute)} flags for {len(b) - 1} stages")
        if self.partial is not None and (len(self.partial) != len(b) - 1
                                         or any(c is not None and c < 1 for c in self.partial)):
            errs.append(f"partial needs one count >= 1 (or None) per stage (got {list(self.partial)})")
        return errs


def stage_devices(cluster: Cluster) -> list[int]:
    """The device of each model stage under the cluster's placement."""
    return [stage_device(s, cluster.devices, cluster.placement) for s in range(cluster.num_stages)]


def crossings_before(cluster: Cluster) -> list[int]:
    """``x_s``: boundaries between different devices before stage ``s`` (fixed by the placement)."""
    where = stage_devices(cluster)
    out = [0]
    for s in range(1, len(where)):
        out.append(out[-1] + (where[s - 1] != where[s]))
    return out


def one_microbatch_peak(stages: list[StageSums]) -> float:
    """Activation peak of one microbatch alone on a device holding ``stages`` (model order): its Fs in
    order, then B and W stage by stage backwards; every schedule's peak on that device is at least this
    (the microbatch's own Fs are held until its Bs), transients included."""
    held = peak = 0.0
    for st in stages:
        peak = max(peak, held + max(st.d_forward, 0.0))
        held += st.d_forward
    for st in reversed(stages):
        peak = max(peak, held + max(st.d_backward_input, 0.0) + st.transient)
        held += st.d_backward_input
        peak = max(peak, held + max(st.d_backward_weight, 0.0))
        held += st.d_backward_weight
    return peak


def _heaviest(layers: list[ExpandedLayer], r: range, key: str) -> str:
    k = max(r, key=lambda i: getattr(layers[i], key))
    return f"layer {k} ({layers[k].name})"


def device_limits(layers: list[ExpandedLayer], cluster: Cluster, split: Split,
                  sums: list[StageSums]) -> list[float | None]:
    """Each device's activation limit, its memory less its stages' static memory (None when memory is
    unbounded); raises :class:`InfeasibleSplit` when static memory alone, or one microbatch under the
    limit less the device's largest transient (what methods schedule against), does not fit."""
    where = stage_devices(cluster)
    limits: list[float | None] = []
    for d in range(cluster.devices):
        mine = [s for s in range(split.num_stages) if where[s] == d]
        total = cluster.memory(d)
        if math.isinf(total):
            limits.append(None)
            continue
        static = math.fsum(sums[s].static for s in mine)
        transient = max((sums[s].transient for s in mine), default=0.0)
        limit = tidy(total - static - transient)  # what methods schedule against (core/transients.py)
        span = ", ".join(f"[{split.bounds[s]}, {split.bounds[s + 1]})" for s in mine)
        if total - static < 0:
            heavy = _heaviest(layers, range(split.bounds[mine[0]], split.bounds[mine[0] + 1]), "static")
            raise InfeasibleSplit(f"device {d}: static memory {static:g} of layers {span} (heaviest {heavy}) "
                                  f"exceeds its memory {total:g}")
        plain = [StageSums(**{**vars(sums[s]), "transient": 0.0}) for s in mine]
        need = one_microbatch_peak(plain)
        if need > limit * (1 + 1e-12) + 1e-12:
            s = max(mine, key=lambda s: sums[s].held + sums[s].transient)
            heavy = _heaviest(layers, split.layers(s), "mem_forward")
            raise InfeasibleSplit(
                f"device {d}: one microbatch needs {need:g} of activations (layers {span}, heaviest {heavy}) "
                f"but only {limit:g} is left after static {static:g} and recompute transient {transient:g} "
                f"of memory {total:g}")
        limits.append(tidy(total - static))
    return limits


def problem_units(units: ModelUnits | None) -> Units | None:
    """The model's unit names as a Problem's labels; a name a Problem refuses (over 16 characters, not
    printable) is left out rather than failing the plan: labels never change a schedule."""
    if units is None:
        return None
    kept = {}
    for field, name in units.model_dump().items():
        try:
            kept[field] = Units(**{field: name}).model_dump()[field]
        except ValidationError:
            continue
    return Units(**kept) if kept else None


def overlap_factor(st: StageSums) -> float:
    """``costs.overlap_fb`` of a stage whose F + B holds ``comm`` of collectives (an expert-parallel
    all-to-all): run as one pair with another microbatch's op, each one's collectives hide under the
    other's compute, so the pair lasts ``max(compute, comm)`` of ``F + B`` (DualPipe's premise, DeepSeek-V3
    §3.2.1), rounded up to four decimals."""
    total = st.forward + st.backward_input
    if not st.comm or total <= 0:
        return 1.0
    return min(1.0, math.ceil(max(total - st.comm, st.comm) / total * 1e4) / 1e4)


def induce(layers: list[ExpandedLayer], cluster: Cluster, split: Split, microbatches: int,
           units: ModelUnits | None = None) -> Problem:
    """The :class:`Problem` of running ``split`` on ``cluster`` with ``microbatches`` microbatches,
    labelled with the model's ``units``."""
    errs = split.errors(len(layers), cluster.num_stages)
    if errs:
        raise ValueError("; ".join(errs))
    sums = [stage_sums(layers, split.bounds[s], split.bounds[s + 1], split.recompute[s], split.count(s))
            for s in range(split.num_stages)]
    where = stage_devices(cluster)
    comm = [tidy(cluster.boundary_link(where[s], where[s + 1]).time(sums[s].output)) if where[s] != where[s + 1]
            else 0.0 for s in range(split.num_stages - 1)]
    grad_sync, optimizer = step_costs(layers, cluster, split)
    transient = [x.transient for x in sums]
    limits = device_limits(layers, cluster, split, sums)
    limit = None if cluster.memory_per_device is None else [float(x) for x in limits if x is not None]
    overlap = [overlap_factor(x) for x in sums] if any(x.comm is not None for x in sums) else None
    return Problem(
        devices=cluster.devices, microbatches=microbatches, stages_per_device=cluster.stages_per_device,
        placement=cluster.placement, split_backward=cluster.split_backward, objective=cluster.objective,
        costs=Costs(forward=[x.forward for x in sums], backward_input=[x.backward_input for x in sums],
                    backward_weight=[x.backward_weight for x in sums], comm=comm if comm else 0.0,
                    overlap_fb=overlap, grad_sync=grad_sync, optimizer=optimizer),
        memory=Memory(forward=[x.d_forward for x in sums], backward_input=[x.d_backward_input for x in sums],
                      backward_weight=[x.d_backward_weight for x in sums], limit=limit,
                      backward_input_transient=transient if any(transient) else 0.0),
        units=problem_units(units),
    )


def step_costs(layers: list[ExpandedLayer], cluster: Cluster, split: Split) -> tuple[list[float] | float,
                                                                                  list[float] | float]:
    """``costs.grad_sync`` per stage (its layers' gradients over the data-parallel group,
    :meth:`DataParallel.sync_time`) and ``costs.optimizer`` per device (its layers' optimizer memory over
    the memory bandwidth); 0 where the cluster has no data parallelism or no memory bandwidth."""
    dp, bandwidth = cluster.data_parallel, cluster.memory_bandwidth
    sync: list[float] | float = 0.0
    if dp is not None and dp.degree > 1:
        sync = [tidy(dp.sync_time(math.fsum(layers[i].gradient for i in split.layers(s))))
                for s in range(split.num_stages)]
    optimizer: list[float] | float = 0.0
    if bandwidth is not None:
        where = stage_devices(cluster)
        optimizer = [tidy(math.fsum(layers[i].optimizer for s in range(split.num_stages) if where[s] == d
                                    for i in split.layers(s)) / bandwidth) for d in range(cluster.devices)]
    return sync, optimizer


def model_infeasibility(layers: list[ExpandedLayer], cluster: Cluster) -> str | None:
    """Why no split of the model fits the cluster at all, or None: a layer whose static memory plus
    one microbatch's activations (recomputed if that is smaller) exceeds every device, or more static
    memory in total than all devices hold."""
    if cluster.memory_per_device is None:
        return None
    largest = max(cluster.memory(d) for d in range(cluster.devices))
    for x in layers:
        need = min(one_microbatch_peak([stage_sums([x], 0, 1, rc)]) for rc in (False, True))
        if x.static + need > largest:
            return (f"layer {x.index} ({x.name}) needs {x.static + need:g} (static {x.static:g} + activations "
                    f"{need:g}) but no device has more than {largest:g}")
    static = math.fsum(x.static for x in layers)
    total = math.fsum(cluster.memory(d) for d in range(cluster.devices))
    if static > total:
        return f"the layers' static memory {static:g} exceeds the {total:g} all {cluster.devices} devices hold"
    return None

"""Plain-array view of a :class:`Problem` for the solvers' hot paths.

Pydantic stays at the wire boundary; everything that loops over ops reads an
:class:`Instance`: per-stage lists already expanded, the stage→device map computed once,
and the dependency rules of the problem written in exactly one place (:meth:`Instance.predecessors`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Literal, NamedTuple

from .problem import Problem
from .transients import reserve_transients

Kind = Literal["F", "B", "W"]
KINDS: tuple[Kind, ...] = ("F", "B", "W")


class OpId(NamedTuple):
    """An op of the problem: its kind, model stage and microbatch."""

    kind: Kind
    stage: int
    microbatch: int

    def __str__(self) -> str:
        return f"{self.kind}(stage {self.stage}, mb {self.microbatch})"


def stage_device(stage: int, devices: int, placement: str) -> int:
    """Device that holds ``stage``: ``s % p`` for loop placement, the V fold for ``"v"`` and ``"dual"``
    (dual: the downward copy's stage ``k`` on device ``k``, the upward copy's id ``p + k`` on ``p - 1 - k``)."""
    if placement in ("v", "dual"):
        return stage if stage < devices else 2 * devices - 1 - stage
    return stage % devices


def _expand(value: float | list[float], stages: int, dual: bool = False) -> tuple[float, ...]:
    """Per stage id; under "dual" the list is per model stage and the upward copy repeats it."""
    out = tuple(float(x) for x in value) if isinstance(value, list) else (float(value),) * (stages // 2 if dual else stages)
    return out + out if dual else out


def model_stage(stage: int, devices: int, placement: str) -> int:
    """The model stage a stage id runs: itself, or ``s - p`` for the upward copy of a dual placement."""
    return stage - devices if placement == "dual" and stage >= devices else stage


@dataclass(frozen=True)
class Instance:
    """Everything a solver needs, as tuples indexed by stage or device."""

    devices: int
    microbatches: int
    stages_per_device: int
    placement: str
    split_backward: bool
    objective: str
    comm: float
    device_of_stage: tuple[int, ...]
    duration: dict[str, tuple[float, ...]]  # kind -> per-stage duration
    delta: dict[str, tuple[float, ...]]  # kind -> per-stage memory delta
    limit: tuple[float, ...]  # per device, what methods schedule against; math.inf when uncapped
    #: Microbatches ``0..split-1`` run through stages ``0..p-1`` (the downward copy), the rest through
    #: ``p..2p-1``; only "dual" makes this differ from ``microbatches`` (then every op belongs to one copy).
    split: int = -1
    #: ``costs.overlap_fb`` per stage id (the factor read at a pair's forward), or None: no F&B pairs.
    overlap: tuple[float, ...] | None = None
    #: Per model stage boundary (``comm`` is then their largest); empty: ``comm`` on every boundary.
    comms: tuple[float, ...] = ()
    #: Per stage id, memory live only while its B runs (recompute); empty: none.
    transient: tuple[float, ...] = ()
    #: Per device, the problem's memory limit when ``limit`` keeps back the device's largest transient
    #: for methods that do not model transients (:mod:`pipesched.solver.core.transients`); empty: ``limit``.
    cap: tuple[float, ...] = ()
    #: The step's tail (:mod:`pipesched.solver.core.step`): per stage id its gradient sync, per device its
    #: optimizer step; both empty when the problem sets neither (the step ends at the last op).
    sync: tuple[float, ...] = ()
    optimizer: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.split < 0:
            object.__setattr__(self, "split", self.microbatches)

    @classmethod
    def from_problem(cls, problem: Problem) -> Instance:
        stages, dual = problem.num_stages, problem.placement == "dual"
        c, mem = problem.costs, problem.memory
        f, bi, bw = (_expand(x, stages, dual) for x in (c.forward, c.backward_input, c.backward_weight))
        df, dbi, dbw = (_expand(x, stages, dual) for x in (mem.forward, mem.backward_input, mem.backward_weight))
        if problem.split_backward:
            duration = {"F": f, "B": bi, "W": bw}
            delta = {"F": df, "B": dbi, "W": dbw}
        else:  # fused backward: B does both halves and frees what both would free
            duration = {"F": f, "B": tuple(a + b for a, b in zip(bi, bw, strict=True))}
            delta = {"F": df, "B": tuple(a + b for a, b in zip(dbi, dbw, strict=True))}
        if mem.limit is None:
            limit = (math.inf,) * problem.devices
        elif isinstance(mem.limit, list):
            limit = tuple(float(x) for x in mem.limit)
        else:
            limit = (float(mem.limit),) * problem.devices
        comms = tuple(float(x) for x in c.comm) if isinstance(c.comm, list) else ()
        transient = _expand(mem.backward_input_transient, stages, dual)
        transient = transient if any(transient) else ()
        cap, limit = reserve_transients(limit, transient, [stage_device(s, problem.devices, problem.placement)
                                                           for s in range(stages)])
        sync = _expand(c.grad_sync, stages, dual)
        optimizer = tuple(float(x) for x in c.optimizer) if isinstance(c.optimizer, list) else \
            (float(c.optimizer),) * problem.devices
        tail = any(sync) or any(optimizer)
        return cls(
            devices=problem.devices,
            microbatches=problem.microbatches,
            stages_per_device=problem.stages_per_device,
            placement=problem.placement,
            split_backward=problem.split_backward,
            objective=problem.objective,
            comm=max(comms, default=0.0) if isinstance(c.comm, list) else float(c.comm),
            device_of_stage=tuple(stage_device(s, problem.devices, problem.placement) for s in range(stages)),
            duration=duration,
            delta=delta,
            limit=limit,
            split=problem.down_microbatches,
            overlap=None if c.overlap_fb is None else _expand(c.overlap_fb, stages, dual),
            comms=comms,
            transient=transient,
            cap=cap,
            sync=sync if tail else (),
            optimizer=optimizer if tail else (),
        )

    # ----------------------------------------------------------------- structure
    @property
    def tail(self) -> bool:
        """Whether the step ends after the ops (gradient syncs or optimizer steps to run)."""
        return bool(self.optimizer)

    @property
    def num_stages(self) -> int:
        return len(self.device_of_stage)

    @property
    def kinds(self) -> tuple[Kind, ...]:
        return KINDS if self.split_backward else ("F", "B")

    @property
    def dual(self) -> bool:
        return self.placement == "dual"

    @property
    def num_ops(self) -> int:
        """How many ops a schedule has: what every time and model-size estimate scales with."""
        copies = 2 if self.dual else 1
        return len(self.kinds) * self.num_stages // copies * self.microbatches

    def copy_range(self, stage: int) -> tuple[int, int]:
        """First and last stage id of the chain ``stage`` is on: the whole model, or under "dual" its copy."""
        if not self.dual:
            return 0, self.num_stages - 1
        p = self.devices
        return (0, p - 1) if stage < p else (p, 2 * p - 1)

    def stage_microbatches(self, stage: int) -> range:
        """Microbatches that run ``stage``: all, or under "dual" those of its copy's direction."""
        if not self.dual:
            return range(self.microbatches)
        return range(self.split) if stage < self.devices else range(self.split, self.microbatches)

    def microbatch_stages(self, microbatch: int) -> range:
        """Stage ids microbatch ``i`` visits, in model order (``F`` runs them first to last)."""
        if not self.dual:
            return range(self.num_stages)
        p = self.devices
        return range(p) if microbatch < self.split else range(p, 2 * p)

    def has_op(self, op: OpId) -> bool:
        """Whether ``op`` is an op of the problem (kind, stage and microbatch in range, and its copy's)."""
        return (op.kind in self.kinds and 0 <= op.stage < self.num_stages
                and op.microbatch in self.stage_microbatches(op.stage))

    def chain(self, microbatch: int) -> list[OpId]:
        """Microbatch ``i``'s dependency chain ``F(first..last)``, ``B(last..first)`` (W hangs off its B)."""
        stages = self.microbatch_stages(microbatch)
        return [OpId("F", s, microbatch) for s in stages] + [OpId("B", s, microbatch) for s in reversed(stages)]

    def directions(self) -> list[Instance]:
        """Under "dual", the two copies as plain one-chunk instances on the same devices (each with its
        microbatches only): a dual schedule restricted to one copy's ops is a schedule of that
        instance, so a lower bound of either is one of the dual problem. Empty for other placements."""
        if not self.dual:
            return []
        p, out = self.devices, []
        for stages, count in ((range(p), self.split), (range(p, 2 * p), self.microbatches - self.split)):
            if count == 0:
                continue
            out.append(Instance(
                devices=p, microbatches=count, stages_per_device=1, placement="loop",
                split_backward=self.split_backward, objective=self.objective, comm=self.comm,
                device_of_stage=tuple(self.device_of_stage[s] for s in stages),
                duration={k: tuple(v[s] for s in stages) for k, v in self.duration.items()},
                delta={k: tuple(v[s] for s in stages) for k, v in self.delta.items()},
                limit=self.limit, comms=self.comms,
                transient=tuple(self.transient[s] for s in stages) if self.transient else (),
                cap=self.cap,
            ))
        return out

    @cached_property
    def stages_of_device(self) -> tuple[tuple[int, ...], ...]:
        """Stages held by each device, in model order."""
        out: list[list[int]] = [[] for _ in range(self.devices)]
        for s, d in enumerate(self.device_of_stage):
            out[d].append(s)
        return tuple(tuple(x) for x in out)

    def ops(self) -> list[OpId]:
        """All ops, in a fixed canonical order (kind, stage, microbatch)."""
        return [OpId(k, s, i) for k in self.kinds for s in range(self.num_stages) for i in self.stage_microbatches(s)]

    def device(self, op: OpId) -> int:
        return self.device_of_stage[op.stage]

    def cost(self, op: OpId) -> float:
        return self.duration[op.kind][op.stage]

    def mem(self, op: OpId) -> float:
        return self.delta[op.kind][op.stage]

    def pair_cost(self, f: OpId, b: OpId) -> float:
        """Duration of F ``f`` and B ``b`` run as one overlapped op (``costs.overlap_fb``): never shorter
        than the longer half, otherwise the factor at the forward's stage times the sum."""
        cf, cb = self.cost(f), self.cost(b)
        factor = self.overlap[f.stage] if self.overlap is not None else 1.0
        return max(cf, cb, factor * (cf + cb))

    def without_overlap(self) -> Instance:
        """A relaxation of an overlapped instance with no pairs: each F scaled by its stage's factor and
        each B by the smallest factor. A pair lasts at least ``factor(F) F + min factor B``, so the two
        scaled ops fit inside it one after the other: any bound of this instance bounds ``self``."""
        if self.overlap is None:
            return self
        low = min(self.overlap)
        duration = dict(self.duration)
        duration["F"] = tuple(x * k for x, k in zip(self.duration["F"], self.overlap, strict=True))
        duration["B"] = tuple(x * low for x in self.duration["B"])
        return replace(self, duration=duration, overlap=None)

    def link(self, a: int, b: int) -> float:
        """Latency between consecutive stages ``a`` and ``b`` (0 when they share a device): ``comm``, or
        the entry of their model boundary (under "dual" both copies share the model's boundaries)."""
        if self.device_of_stage[a] == self.device_of_stage[b]:
            return 0.0
        return self.comms[model_stage(min(a, b), self.devices, self.placement)] if self.comms else self.comm

    def surge(self, op: OpId) -> float:
        """Memory live only while ``op`` runs: its stage's transient for a B, else 0."""
        return self.transient[op.stage] if self.transient and op.kind == "B" else 0.0

    def memory_cap(self, device: int) -> float:
        """The problem's limit of ``device``: what peaks (transients included) are checked against."""
        return self.cap[device] if self.cap else self.limit[device]

    def relaxed(self) -> Instance:
        """Without transients and with the problem's limits: a relaxation (every schedule of this
        instance is one of it), so its lower bounds and infeasibility proofs hold here too."""
        if not self.transient:
            return self
        return replace(self, limit=self.cap or self.limit, cap=(), transient=())

    def predecessors(self, op: OpId) -> list[tuple[OpId, float]]:
        """The ops that must end before ``op`` starts, each with the lag (comm) after its end.

        F(s,i) after F(s-1,i); B(S-1,i) after F(S-1,i); B(s,i) after B(s+1,i); W(s,i) after B(s,i).
        Under "dual" the chain is the stage's copy (:meth:`copy_range`): it never crosses ``p - 1 -> p``.
        """
        kind, s, i = op
        first, last = self.copy_range(s) if self.dual else (0, self.num_stages - 1)
        if kind == "F":
            return [(OpId("F", s - 1, i), self.link(s - 1, s))] if s > first else []
        if kind == "B":
            if s == last:
                return [(OpId("F", s, i), 0.0)]
            return [(OpId("B", s + 1, i), self.link(s + 1, s))]
        return [(OpId("B", s, i), 0.0)]

    def successors(self, op: OpId) -> list[tuple[OpId, float]]:
        """Inverse of :meth:`predecessors`."""
        kind, s, i = op
        first, last = self.copy_range(s) if self.dual else (0, self.num_stages - 1)
        if kind == "F":
            nxt = OpId("F", s + 1, i) if s < last else OpId("B", s, i)
            out = [(nxt, self.link(s, s + 1) if s < last else 0.0)]
            return out
        if kind == "B":
            out = [(OpId("B", s - 1, i), self.link(s, s - 1))] if s > first else []
            if self.split_backward:
                out.append((OpId("W", s, i), 0.0))
            return out
        return []

    # ----------------------------------------------------------------- totals
    def device_work(self) -> list[float]:
        """Busy time each device must spend, whatever the schedule."""
        work = [0.0] * self.devices
        for k in self.kinds:
            for s, d in enumerate(self.device_of_stage):
                work[d] += self.duration[k][s] * len(self.stage_microbatches(s))
        return work

    def total_work(self) -> float:
        return sum(self.device_work())

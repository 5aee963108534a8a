"""Choose a layer split from costs of *whole stages* profiled on this machine (issue 11).

Why not the planner's layer sums: a stage does not cost the sum of its layers' profiles (split
backward's graph walks, caches, allocation differ with depth), and a layer profile taken minutes
before the stage profile or the replay carries a different machine speed (on a shared VM the same
block profiled 55% slower an hour apart). A split chosen on layer sums can therefore lose to the
uniform one in the replay while the planner predicted a gain.

So here each distinct contiguous segment ``[a, b)`` that some candidate split uses is profiled as one
stage (F, B, W exactly as the executor runs them), once per *round*, all segments in every round and
the rounds alternated, with the median per op over rounds: a change of machine speed during
profiling hits every segment, and so every candidate, alike. Each candidate split's Problem is then
solved at the Problem level (``pipesched.solver.solve``, ``auto`` by default) and the least makespan
wins. Small models enumerate every split; larger ones take the planner's candidates (its rule
splits, its plan, and one-layer boundary moves of each) so the profile stays O(candidates · S).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import torch
from torch import nn

from pipesched.solver import Costs, Problem, Schedule, SolveOptions, solve
from pipesched.solver.planning import Cluster, Link, Model, candidate_splits
from pipesched.solver.planning.candidates import SplitRanges

from ..host_memory import keep_freed_host_memory
from ..replay.split_backward import backward_input
from .profile_layers import OpClock

GIB = 2.0**30
Segment = tuple[int, int]
Triple = tuple[float, float, float]


@dataclass(frozen=True)
class SegmentProfile:
    """Median (F, B, W) ms of each profiled segment, the per-round samples behind them, and the bytes
    of the activation entering each layer index (what a stage boundary there sends)."""

    costs: dict[Segment, Triple]
    samples: dict[Segment, list[Triple]]
    boundary_bytes: dict[int, int]
    rounds: int

    def stage_costs(self, split: Sequence[Segment], *, link: Link | None = None, dispatch_ms: float = 0.0,
                    contention: float = 1.0) -> Costs:
        """Per-stage costs of ``split``: profiled compute × ``contention`` + ``dispatch_ms`` per op (a
        whole-stage profile already holds each op's own fixed cost once); ``comm`` from ``link`` for the
        largest activation crossing a boundary."""
        f, b, w = ([contention * self.costs[tuple(seg)][i] + dispatch_ms for seg in split] for i in range(3))
        crossing = [self.boundary_bytes[end] / GIB for _, end in split[:-1]]
        comm = link.time(max(crossing)) if link is not None and crossing else 0.0
        return Costs(forward=f, backward_input=b, backward_weight=w, comm=comm)


@dataclass(frozen=True)
class ProfiledSplit:
    """The chosen split, its Problem and schedule, every candidate's predicted step (ms: its makespan or
    its ``score``) and its schedule (aligned with ``candidates``)."""

    split: SplitRanges
    problem: Problem
    schedule: Schedule
    candidates: list[tuple[SplitRanges, float]]
    profile: SegmentProfile
    enumerated: bool = True
    schedules: list[Schedule] = field(default_factory=list)

    def schedule_of(self, split: Sequence[Segment]) -> Schedule:
        """Candidate ``split``'s schedule (StopIteration when it was not a candidate)."""
        key = [tuple(s) for s in split]
        return next(sch for (cand, _), sch in zip(self.candidates, self.schedules, strict=True) if cand == key)

    def predicted(self, split: Sequence[Segment]) -> float:
        """Candidate ``split``'s predicted step (its score)."""
        key = [tuple(s) for s in split]
        return next(ms for cand, ms in self.candidates if cand == key)


def shared_cores_score(contention: float | None = None, *, cores: float | None = None,
                       curve: Sequence[float] | None = None, handoff: Sequence[float] | None = None
                       ) -> Callable[[Schedule, Costs], float]:
    """A ``score`` for :func:`profiled_split` when ranks share cores: the candidate's schedule re-timed
    with its p ranks sharing ``cores`` cores, or p / ``contention``, or each of k busy ranks slowed by
    the measured ``curve[k - 1]`` and each hand-off between ranks delayed by ``handoff`` (with the
    curve only; :mod:`.shared_cores`)."""
    from pipesched.solver import from_order
    from pipesched.solver.costmodel.shared_cores import cores_makespan, curve_makespan

    if sum(x is not None for x in (contention, cores, curve)) != 1:
        raise ValueError("give exactly one of contention, cores and curve")

    def score(schedule: Schedule, costs: Costs) -> float:
        bare = Problem.model_validate({**schedule.problem.model_dump(), "costs": costs.model_dump()})
        order = from_order(bare, schedule.method, schedule.order())
        if curve is not None:
            return curve_makespan(order, curve, handoff)
        shared = cores if cores is not None else schedule.problem.devices / contention  # type: ignore[operator]
        return cores_makespan(order, shared)

    return score


def _time_once(stage: nn.Module, x: torch.Tensor, loss: Callable[[torch.Tensor], torch.Tensor] | None,
               cpu_time: bool) -> Triple:
    """One F, B, W of ``stage`` as the executor runs it (ms). Gradients accumulate across calls, as
    they do over a step's microbatches (only its first W allocates ``.grad``)."""
    params = [p for p in stage.parameters() if p.requires_grad]
    xi = x.detach().requires_grad_(x.is_floating_point())
    clock = OpClock(x.device, cpu_time)
    clock.mark()
    out = stage(xi)
    y = loss(out) if loss is not None else out
    clock.mark()
    _, job = backward_input([y], [None if loss is not None else torch.ones_like(out)], [xi], params)
    clock.mark()
    job.run()
    clock.mark()
    f_ms, b_ms, w_ms = clock.elapsed_ms()
    return f_ms, b_ms, w_ms


def profile_segments(layers: Sequence[nn.Module], segments: Sequence[Segment], sample: torch.Tensor, *,
                     loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
                     sample_target: torch.Tensor | None = None, rounds: int = 5, warmup: int = 1,
                     cpu_time: bool = False) -> SegmentProfile:
    """Profile every segment ``[a, b)`` of ``layers`` as one stage, in ``warmup + rounds`` rounds that
    each time every segment once (the order reversed every other round), and keep per op the median
    of the ``rounds`` timed rounds. The segment ending at the last layer is timed with the loss
    (``loss_fn(output, sample_target)``, default the output's mean). ``cpu_time`` times this thread's
    CPU time instead of the wall clock (CPU only)."""
    keep_freed_host_memory()  # time ops as a replay runs them (host_memory.py)
    n = len(layers)
    segs = sorted({(int(a), int(b)) for a, b in segments})
    bad = [s for s in segs if not 0 <= s[0] < s[1] <= n]
    if bad:
        raise ValueError(f"segments {bad[:3]} are not non-empty ranges of the {n} layers")
    if rounds < 1 or warmup < 0:
        raise ValueError(f"rounds must be >= 1 and warmup >= 0 (got {rounds}, {warmup})")
    if loss_fn is not None and sample_target is None:
        raise ValueError("loss_fn needs sample_target (one microbatch of targets)")
    if cpu_time and sample.device.type != "cpu":
        raise ValueError("cpu_time times host threads: it only applies to a model on the CPU")

    def loss(out: torch.Tensor) -> torch.Tensor:
        return out.float().mean() if loss_fn is None else loss_fn(out, sample_target)

    inputs = [sample]  # inputs[k]: the activation entering layer k
    with torch.no_grad():
        for layer in layers:
            inputs.append(layer(inputs[-1]))
    boundary = {k: inputs[k].untyped_storage().nbytes() for k in range(1, n)}
    stages = {s: nn.Sequential(*layers[s[0]:s[1]]) for s in segs}
    for layer in layers:
        layer.zero_grad(set_to_none=True)
    samples: dict[Segment, list[Triple]] = {s: [] for s in segs}
    for r in range(warmup + rounds):
        for s in (segs if r % 2 == 0 else reversed(segs)):
            t = _time_once(stages[s], inputs[s[0]], loss if s[1] == n else None, cpu_time)
            if r >= warmup:
                samples[s].append(t)
    for layer in layers:
        layer.zero_grad(set_to_none=True)
    costs = {s: tuple(statistics.median(t[i] for t in samples[s]) for i in range(3)) for s in segs}
    return SegmentProfile(costs, samples, boundary, rounds)  # type: ignore[arg-type]


def all_splits(num_layers: int, num_stages: int) -> list[SplitRanges]:
    """Every split of ``num_layers`` layers into ``num_stages`` contiguous non-empty stages."""
    return [list(zip((0, *cut), (*cut, num_layers), strict=True))
            for cut in combinations(range(1, num_layers), num_stages - 1)]


def profiled_split(layers: Sequence[nn.Module], sample: torch.Tensor, devices: int, microbatches: int, *,
                   loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
                   sample_target: torch.Tensor | None = None, stages_per_device: int = 1,
                   link: Link | None = None, dispatch_ms: float = 0.0, contention: float = 1.0,
                   method: str = "auto", time_limit_s: float = 2.0, rounds: int = 5, warmup: int = 1,
                   max_enumerated: int = 200, model: Model | None = None, plan_time_limit_s: float = 0.0,
                   extra_segments: Sequence[Segment] = (),
                   score: Callable[[Schedule, Costs], float] | None = None) -> ProfiledSplit:
    """The split of ``layers`` over ``devices × stages_per_device`` loop-placed stages whose schedule,
    solved by ``method`` on whole-stage costs profiled here, has the least makespan.

    Candidates: every split when there are at most ``max_enumerated`` of them; otherwise the planner's
    (:func:`pipesched.solver.planning.candidate_splits`, which needs the layer-profiled ``model``). Each op's cost is the segment's
    profiled time × ``contention`` + ``dispatch_ms``; ``comm`` comes from ``link``. ``extra_segments``
    are profiled in the same rounds (e.g. the stages of other splits a caller compares with), so their
    costs carry the same machine speed. ``score(schedule, compute)`` (default: the makespan) ranks the
    solved candidates by another predictor of the step, given the candidate's costs without the
    contention factor: e.g. ranks that share cores re-timed by
    :func:`pipesched.solver.costmodel.shared_cores.shared_cores_makespan`, where a uniform contention factor
    also slows the ops that run in other ranks' bubbles. Ties keep the earlier candidate.
    """
    n, stages = len(layers), devices * stages_per_device
    if not 1 <= stages <= n:
        raise ValueError(f"cannot split {n} layers into {stages} non-empty stages")
    enumerated = math.comb(n - 1, stages - 1) <= max_enumerated
    if enumerated:
        candidates = all_splits(n, stages)
    elif model is None:
        raise ValueError(f"{math.comb(n - 1, stages - 1)} splits exceed max_enumerated = {max_enumerated}: "
                         "pass the layer-profiled model to take the planner's candidates")
    else:
        cluster = Cluster(devices=devices, stages_per_device=stages_per_device, microbatches=microbatches,
                          link=link or Link())
        candidates = candidate_splits(model, cluster, microbatches, plan_time_limit_s)
    segments = {seg for split in candidates for seg in split} | {tuple(s) for s in extra_segments}
    prof = profile_segments(layers, sorted(segments), sample, loss_fn=loss_fn, sample_target=sample_target,
                            rounds=rounds, warmup=warmup)
    best: tuple[float, SplitRanges, Problem, Schedule] | None = None
    priced: list[tuple[SplitRanges, float]] = []
    schedules: list[Schedule] = []
    for split in candidates:
        problem = Problem(devices=devices, microbatches=microbatches, stages_per_device=stages_per_device,
                          costs=prof.stage_costs(split, link=link, dispatch_ms=dispatch_ms, contention=contention))
        schedule = solve(problem, method, SolveOptions(time_limit_s=time_limit_s))
        ms = math.inf if not schedule.ops else schedule.makespan if score is None else score(
            schedule, prof.stage_costs(split, link=link, dispatch_ms=dispatch_ms))
        priced.append((split, ms))
        schedules.append(schedule)
        if best is None or ms < best[0]:
            best = (ms, split, problem, schedule)
    assert best is not None
    return ProfiledSplit(best[1], best[2], best[3], priced, prof, enumerated, schedules)

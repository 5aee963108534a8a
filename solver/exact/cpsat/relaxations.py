"""Lower bounds stronger than total work: a round-trip argument, and single-device relaxations.

Round trip (:func:`round_trip_span_bound`, stage span, one stage per device): see its docstring;
with ``limit = p * M_B`` it reproduces the zero-bubble paper's ZB-1p bubble exactly.

Relay (:func:`relay_bound`, both objectives, any placement): a device's window must contain the
forward trip to some stage ``k``, every F and B of stage ``k`` (one after another on its device)
and the backward trip home; it reproduces the ZB-2p bubble of the paper's 1.5B, m = 24 case.

Relaxations (:func:`device_bound`, proved by CP-SAT):

Keep one device's ops and give every other device unlimited capacity: the dependency chain of
a microbatch through the other devices then only delays it, by the sum of the costs and comm
latencies it passes through (a lag), and the work before the device's first op (a head) and
after its last backward (a tail, for the makespan). This one-machine problem still has the
device's memory cap, the no-overlap and the microbatch order, so it keeps exactly what makes
the zero-bubble schedules idle: with ``limit = p * M_B`` the first stage can hold only ``p``
forwards while the first backward makes its round trip. Any schedule of the full problem is a
schedule of every relaxation with the same device span (and no later end), so the best proven
bound of a relaxation is a valid bound on the full problem; :func:`relaxation_bound` takes the
largest over the devices it has time for, combined with :func:`bounds.lower_bound`.

:func:`device_bound` also takes a set of devices (e.g. two neighbours on the V): their ops keep
no-overlap, caps and microbatch order together, and only the chains through the devices left out
become lags, by the same argument. ``benchmarks/v_placement_relax.py`` measures what it proves.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping

from ortools.sat.python import cp_model

from ...bounds.analytic import lower_bound as analytic_lower_bound
from ...bounds.combinatorial import combinatorial_bound
from ...core.instance import Instance, OpId
from .formulation import OpGraph, build
from .run import add_hint, horizon_value, model_lower, solver_parameters
from .scaling import Scaling


def chain(inst: Instance, i: int) -> list[OpId]:
    """Microbatch ``i``'s dependency chain F(0..S-1), B(S-1..0) (W hangs off its B)."""
    return inst.chain(i)


def contracted_graph(inst: Instance, sc: Scaling, device: int | frozenset[int]) -> OpGraph:
    """The ops of ``device`` (or of a set of devices) with the chains through the others contracted into lags."""
    keep = frozenset([device]) if isinstance(device, int) else device
    ops: list[OpId] = []
    prec: list[tuple[OpId, OpId, int]] = []
    release: dict[OpId, int] = {}
    tail: dict[OpId, int] = {}
    for i in range(inst.microbatches):
        seq = chain(inst, i)
        clock = 0.0  # earliest time the walk reaches the current op's start, relative to the chain start
        prev: OpId | None = None
        prev_end = 0.0
        for k, op in enumerate(seq):
            if k > 0:
                pred = seq[k - 1]
                clock += inst.cost(pred) + inst.link(pred.stage, op.stage)
            if inst.device(op) not in keep:
                continue
            ops.append(op)
            if prev is None:
                release[op] = sc.dur(clock)
            else:
                prec.append((prev, op, sc.dur(clock - prev_end)))
            prev, prev_end = op, clock + inst.cost(op)
            if op.kind == "B" and inst.split_backward:
                w = OpId("W", op.stage, i)
                ops.append(w)
                prec.append((op, w, 0))
        if prev is not None and prev.kind == "B":
            rest = sum(inst.cost(o) for o in seq[seq.index(prev) + 1:])
            rest += sum(inst.link(a.stage, b.stage) for a, b in zip(seq[seq.index(prev):], seq[seq.index(prev) + 1:],
                                                                     strict=False))
            if rest > 0:
                tail[prev] = sc.dur(rest)
    return OpGraph(ops, prec, release, tail)


def device_relaxation(inst: Instance, device: int | frozenset[int], seconds: float, *, upper: float,
                      workers: int = 1, hint: Mapping[OpId, float] | None = None,
                      dtime: float | None = None) -> tuple[float, float] | None:
    """(proven lower bound, value of the best schedule found) of the relaxation of ``device``; None if
    the model finds nothing. The value is a ceiling on what any argument about those devices alone can
    prove (``benchmarks/v_placement_relax.py`` reads both)."""
    sc = Scaling.of(inst)
    if not sc.bound_is_valid:
        return None
    graph = contracted_graph(inst, sc, device)
    if not graph.ops:
        return None

    horizon = horizon_value(inst, sc, upper)
    cm = build(inst, sc, graph, horizon=horizon, lower=model_lower(inst, sc, analytic_lower_bound(inst)),
               upper=sc.up(upper) + 1)
    if hint is not None:
        add_hint(cm, hint)
    solver = cp_model.CpSolver()
    solver_parameters(solver, seconds, workers, dtime=dtime)
    status = solver.solve(cm.model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return (sc.bound_to_float(solver.best_objective_bound, inst.objective, inst.devices),
            sc.bound_to_float(solver.objective_value, inst.objective, inst.devices))


def device_bound(inst: Instance, device: int | frozenset[int], seconds: float, *, upper: float, workers: int = 1,
                 hint: Mapping[OpId, float] | None = None, dtime: float | None = None) -> float | None:
    """Proven lower bound from the relaxation of ``device`` (None if the model proves nothing)."""
    found = device_relaxation(inst, device, seconds, upper=upper, workers=workers, hint=hint, dtime=dtime)
    return None if found is None else found[0]


def relaxation_bound(inst: Instance, seconds: float, *, upper: float, workers: int = 1,
                     hint: Mapping[OpId, float] | None = None, dtime: float | None = None) -> float:
    """The best of the analytic bound and the single-device relaxations of the first and last devices
    (the first holds the longest round trip under the memory cap; the last the longest ramp-up)."""
    best = combinatorial_bound(inst)
    if best >= upper * (1 - 1e-12):
        return min(best, upper)
    t_end = time.perf_counter() + seconds
    devices = [0] if inst.devices == 1 else [0, inst.devices - 1]
    for k, d in enumerate(devices):
        left = (t_end - time.perf_counter()) / (len(devices) - k)
        if left <= 0.02:
            break
        b = device_bound(inst, d, left, upper=upper, workers=workers, hint=hint,
                         dtime=None if dtime is None else dtime / len(devices))
        if b is not None and math.isfinite(b):
            best = max(best, b)
    return min(best, upper)

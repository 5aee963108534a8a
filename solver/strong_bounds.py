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
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import NamedTuple

from ortools.sat.python import cp_model

from .bounds import backward_drain, forward_arrival
from .bounds import lower_bound as analytic_lower_bound
from .cpsat_model import OpGraph, Scaling, add_hint, build
from .instance import Instance, OpId


def chain(inst: Instance, i: int) -> list[OpId]:
    """Microbatch ``i``'s dependency chain F(0..S-1), B(S-1..0) (W hangs off its B)."""
    S = inst.num_stages
    return [OpId("F", s, i) for s in range(S)] + [OpId("B", s, i) for s in range(S - 1, -1, -1)]


def contracted_graph(inst: Instance, sc: Scaling, device: int) -> OpGraph:
    """The ops of ``device`` with the chains through other devices contracted into lags."""
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
            if inst.device(op) != device:
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


def device_bound(inst: Instance, device: int, seconds: float, *, upper: float, workers: int = 1,
                 hint: Mapping[OpId, float] | None = None, dtime: float | None = None) -> float | None:
    """Proven lower bound from the relaxation of ``device`` (None if the model proves nothing)."""
    sc = Scaling.of(inst)
    if not sc.bound_is_valid:
        return None
    graph = contracted_graph(inst, sc, device)
    if not graph.ops:
        return None
    from .cpsat import horizon_value, model_lower, solver_parameters

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
    return sc.bound_to_float(solver.best_objective_bound, inst.objective, inst.devices)


class _StageMemory(NamedTuple):
    """What the memory bounds read of one stage: levels after F (``l1``) and after B (``l2``), its
    device's cap, its costs, and ``trip``, the least time from F(s, i) starting to B(s, i) starting."""

    l1: float
    l2: float
    cap: float
    f: float
    b: float
    w: float
    trip: float


def _stage_memory(inst: Instance, s: int) -> _StageMemory | None:
    """None unless the stage's memory has the natural shape the bounds assume (F takes, B and W give back)."""
    l1 = inst.delta["F"][s]
    l2 = l1 + inst.delta["B"][s] if inst.split_backward else 0.0
    if not (l1 > 0 and l2 >= 0 and inst.delta["B"][s] <= 0):
        return None
    S = inst.num_stages
    f, b = inst.duration["F"][s], inst.duration["B"][s]
    trip = f + sum(inst.duration["F"][t] + inst.duration["B"][t] for t in range(s + 1, S))
    trip += sum(2 * inst.link(t, t + 1) for t in range(s, S - 1))
    w = inst.duration["W"][s] if inst.split_backward else 0.0
    return _StageMemory(l1, l2, inst.limit[inst.device_of_stage[s]], f, b, w, trip)


def round_trip_span_bound(inst: Instance) -> float:
    """Stage-span bound from the idle time memory forces at both ends of each device's window.

    One stage ``s`` per device (v = 1), memory levels ``L1 = dF > 0`` after F and ``L2 = dF + dB``
    after B, cap ``L``. Let ``R`` be the round trip from F(s, i) starting to B(s, i) starting
    (``F_s`` plus every later stage's F and B plus comm both ways) and ``k = floor(L / L1)``.
    Head: in ``[x, x + R)`` after the window opens with F(s, 0) at ``x``, no B or W exists yet
    (microbatch order), so only forwards run, at most ``k`` of them (no release before a B ends):
    idle ``>= R - min(k, m) F_s``. Tail: in ``[t, t + R)`` after the last forward F(s, m-1) starts
    at ``t`` the device can only run backwards of the ``j`` other microbatches in flight (B + W
    each) and ``w`` pending Ws, with ``(j + 1) L1 + w L2 <= L``: idle ``>= R - F_s - max(j (B + W)
    + w W)``. The two windows are disjoint when ``m > k`` (F(s, k) needs memory that only a
    backward after ``x + R`` frees), so span ``>= work + head + tail``, else ``work + max``.
    """
    if inst.stages_per_device != 1 or not all(math.isfinite(x) for x in inst.limit):
        return 0.0
    m = inst.microbatches
    best = 0.0
    for s in range(inst.num_stages):
        terms = _stage_memory(inst, s)
        if terms is None:
            return 0.0
        l1, l2, cap, f, b, w, trip = terms
        k = int(math.floor(cap / l1 * (1 + 1e-12)))
        if k < 1:
            return 0.0
        head = max(0.0, trip - min(k, m) * f)
        fill = 0.0
        for j in range(0, min(k, m) ):
            room = cap - (j + 1) * l1
            if room < -1e-9 * cap or j > m - 1:
                break
            pending = m - 1 - j if l2 <= 0 else min(m - 1 - j, int(math.floor(room / l2 * (1 + 1e-12))))
            fill = max(fill, j * (b + w) + max(0, pending) * w)
        tail = max(0.0, trip - f - fill)
        work = m * (f + b + w)
        best = max(best, work + (head + tail if m > k else max(head, tail)))
    return best


def ramp_span(energy: float, cap: float, l1: float, f: float, r: float) -> float:
    """Least window length ``T`` whose memory-time capacity reaches ``energy`` once the ramps are counted.

    At ``u`` after the window opens (with an F) at most ``floor(u / f) + 1`` forwards have started, so
    the memory held is at most ``min(L, L1 (floor(u / f) + 1))``; at ``t`` before it closes every
    microbatch still holding memory must end its last op (W, or B when fused: duration ``r``) in the
    last ``t``, and those ends are ``r`` apart, so at most ``min(L, L1 ceil(t / r))`` is held. The
    capacity ``C(T) = integral over [0, T] of min(head(u), tail(T - u))`` grows with ``T``; bisection
    returns a value just below the least ``T`` with ``C(T) >= energy`` (it is a valid bound).
    Without ramps ``C(T) = L T``: the plain ``energy / L``.
    """
    plain = energy / cap
    k = math.ceil(cap / l1 - 1e-12)  # steps until a ramp reaches the cap
    if f <= 0 or r <= 0 or k > 10_000:
        return plain

    def head(u: float) -> float:
        return min(cap, l1 * (math.floor(u / f * (1 + 1e-12)) + 1))

    def tail(t: float) -> float:
        return min(cap, l1 * math.ceil(t / r * (1 - 1e-12)))

    def capacity(T: float) -> float:
        cuts = {0.0, T}
        cuts.update(j * f for j in range(1, k + 1) if j * f < T)
        cuts.update(T - j * r for j in range(1, k + 1) if T - j * r > 0)
        pts = sorted(cuts)
        return sum((b - a) * min(head((a + b) / 2), tail(T - (a + b) / 2)) for a, b in zip(pts, pts[1:], strict=False))

    lo, hi = plain, plain + (k + 1) * (f + r)
    if capacity(lo) >= energy:
        return plain
    for _ in range(60):  # the bracket shrinks below 1e-15 relative
        mid = (lo + hi) / 2
        if capacity(mid) >= energy:
            hi = mid
        else:
            lo = mid
    return lo


def energy_bound(inst: Instance) -> float:
    """Memory-energy bound, any objective (one stage per device).

    Microbatch i holds ``L1`` on stage s's device from F(s, i) starting until B(s, i) ends (at least
    the round trip ``R`` plus ``B_s``) and ``L2`` until W(s, i) ends (at least ``W_s`` more). Under
    the cap ``L`` the device window must hold all that memory-time: ``span >= m (L1 (R + B) + L2 W) / L``,
    sharpened by the ramps at both ends of the window, where less than ``L`` can be held
    (:func:`ramp_span`). For the makespan the device cannot open its window before its first forward
    can arrive.
    """
    if inst.stages_per_device != 1 or not all(math.isfinite(x) for x in inst.limit):
        return 0.0
    S, m = inst.num_stages, inst.microbatches
    arrive = 0.0
    best = 0.0
    for s in range(S):
        terms = _stage_memory(inst, s)
        if terms is None or terms.cap <= 0:
            return 0.0
        l1, l2, cap, f, b, w, trip = terms
        span = ramp_span(m * (l1 * (trip + b) + l2 * w), cap, l1, f, w if inst.split_backward else b)
        best = max(best, span + (arrive if inst.objective == "makespan" else 0.0))
        if s < S - 1:
            arrive += f + inst.link(s, s + 1)
    return best


def relay_bound(inst: Instance) -> float:
    """Bound from one stage's serial work relayed between a device's first forward and last op.

    Device ``d`` opens its window with F(s0, i0), ``s0`` its lowest stage (every op on ``d`` follows
    that microbatch's F there). For any stage ``k >= s0``, let F(k, a) be the first forward to start
    on stage ``k`` and B(k, z) the last backward to end: the ``2m`` ops F(k, .), B(k, .) all run in
    between, one at a time on their device, so ``B(k, z)`` ends ``>= F(s0, a) + fwd(s0 -> k) +
    m (F_k + B_k)``; then B(k, z) still has to travel back to ``s0`` and W(s0, z) follows (split
    backward), all before the window closes. So span ``>= fwd(s0 -> k) + m (F_k + B_k) + bwd(k -> s0)
    + W_s0``, with ``F(s0, a) >= arrival(s0)`` added for the makespan. No memory, no search: it
    is what limits a device whose stage ``k`` is busier per microbatch with F + B than its own
    stage is with F + B + W once Ws may wait (the last stage of the zero-bubble profiles).
    """
    arrive, drain = forward_arrival(inst), backward_drain(inst)
    m = inst.microbatches
    best = 0.0
    for stages in inst.stages_of_device:
        if not stages:
            continue
        s0 = min(stages)
        base = arrive[s0] if inst.objective == "makespan" else 0.0
        home = inst.duration["W"][s0] if inst.split_backward else 0.0
        for k in range(s0, inst.num_stages):
            relay = m * (inst.duration["F"][k] + inst.duration["B"][k])
            best = max(best, base + arrive[k] - arrive[s0] + relay + drain[k] - drain[s0] + home)
    return best


def combinatorial_bound(inst: Instance) -> float:
    """The best of the analytic, round-trip (stage span), relay and energy bounds; no search."""
    best = max(analytic_lower_bound(inst), energy_bound(inst), relay_bound(inst))
    if inst.objective == "stage_span":
        best = max(best, round_trip_span_bound(inst))
    return best


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

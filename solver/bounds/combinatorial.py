"""Lower bounds stronger than total work, in closed form (no search).

Round trip (:func:`round_trip_span_bound`, stage span, one stage per device): see its docstring;
with ``limit = p * M_B`` it reproduces the zero-bubble paper's ZB-1p bubble exactly.

Relay (:func:`relay_bound`, both objectives, any placement): a device's window must contain the
forward trip to some stage ``k``, every F and B of stage ``k`` (one after another on its device)
and the backward trip home; it reproduces the ZB-2p bubble of the paper's 1.5B, m = 24 case.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from ..core.instance import Instance
from .analytic import backward_drain, forward_arrival
from .analytic import lower_bound as analytic_lower_bound
from .dual import dual_bound
from .shared_cap import shared_cap_bound
from .step import step_bound
from .v_turn import v_turn_bound


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
    """The best of the analytic, round-trip (stage span), relay, energy, V-turn and shared-cap bounds; no
    search. With a step tail (gradient syncs, optimizer), the step's bounds on top (:mod:`.step`)."""
    pipeline = _pipeline_bound(inst)
    return step_bound(inst, pipeline) if inst.tail else pipeline


def _pipeline_bound(inst: Instance) -> float:
    """A bound on when the last op ends (the step ends no earlier)."""
    if inst.overlap is not None:  # F&B pairs shorten devices' work: bound the pair-free relaxation
        return _pipeline_bound(inst.without_overlap())
    if inst.dual:  # the chains stop at each copy's end: bound the copies (.dual)
        return dual_bound(inst, _pipeline_bound)
    best = max(analytic_lower_bound(inst), energy_bound(inst), relay_bound(inst), v_turn_bound(inst),
               shared_cap_bound(inst))
    if inst.objective == "stage_span":
        best = max(best, round_trip_span_bound(inst))
    return best

"""A lower bound that sees the turn of the V: both ends of each device's window, under its memory cap.

On the V placement (``v = 2``) device ``d`` holds the chunk-0 stage ``s = d`` and the chunk-1 stage
``t = 2p - 1 - d``; a microbatch runs down the devices through ``s``, turns, and comes back up
through ``t``. The relay and round-trip bounds (:mod:`.combinatorial`) model one stage per device
and miss that the device's own two stages are far apart on the chain. Two idle windows follow.

**Head.** Let ``t0`` be the first start on ``d`` and ``tau`` the first start of an op of stage ``t``
(an ``F``: every ``B`` or ``W`` of ``t`` follows its ``F``). Before ``tau`` the device can run only
``F(s, .)``: ``B(s, j)`` and ``W(s, j)`` follow ``B(t, j)``, which follows ``F(t, j)``. So nothing
frees memory before ``tau``, and when the first ``F(t, .)`` starts (its positive delta applies at its
start) ``n dF_s + max(dF_t, 0) <= cap``, ``n`` the forwards of ``s`` started before ``tau``: with
``dF_s > 0``, ``n <= k = floor((cap - max(dF_t, 0)) / dF_s)`` (and ``n <= m``). The op at ``tau``
belongs to some microbatch ``j`` whose ``F(s, j)`` started at ``>= t0``, so ``tau >= t0 + gap_f`` with
``gap_f`` the forward chain from ``F(s)``'s start to ``F(t)``'s (``F`` of stages ``s .. t-1`` plus comm).
The device is busy at most ``min(k, m) F_s`` of ``[t0, tau)``: idle ``>= gap_f - min(k, m) F_s``.

**Tail.** Let ``u`` be the end of the last ``B(t, z)`` on ``d`` and ``T`` the device's last end. ``B(s,
z)`` starts ``>= u + gap_b`` (``B`` of stages ``t-1 .. s+1`` plus comm), then ``B_s`` and ``W_s`` run,
so ``T - u >= gap_b + B_s + W_s``. Every op of ``d`` not started by ``u`` is a ``B(s, .)``, ``W(s, .)``
or ``W(t, .)`` (every ``F`` of ``d`` and ``B`` of ``t`` precedes ``B(t, z)``'s end or is it). Just after
``u`` nothing runs on ``d``, and each microbatch still holds memory there: ``l1_s = dF_s`` if its
``B(s)`` has not started (``a`` of them, ``z`` included), ``l2_s = dF_s + dB_s`` if only its ``W(s)`` is
left (``b``), and ``l2_t`` on the other stage while its ``W(t)`` is left (``c``). With every holding
``>= 0`` the level ``a l1_s + b l2_s + c l2_t <= cap``, and the work left is at most ``a (B_s + W_s) +
b W_s + c W_t`` (maximised over the integer ``a >= 1`` and fractional ``b``, ``c``: a relaxation, so
still an upper bound on the work). Idle ``>= gap_b + B_s + W_s - max work``.

The windows ``[t0, tau)`` and ``[u, T]`` are disjoint (``tau`` is at most ``B(t, z)``'s start), so the
device's span is at least its work plus both idles: a stage-span bound, and with ``t0 >= arrival(s)``
a makespan bound. Placements other than ``"v"`` (and memory shapes with a negative holding, where
the counts are capped by ``m`` only) are handled safely: the bound is 0 for an unknown placement.
"""

from __future__ import annotations

import math

from ..core.instance import Instance
from ..core.tolerance import cap_with_slack


def _count(cap: float, taken: float, each: float, most: int) -> float:
    """How many holdings of ``each`` fit in ``cap - taken`` (``most`` when they cost nothing)."""
    if each <= 0:
        return float(most)
    return max(0.0, min(float(most), (cap - taken) / each))


def _head_idle(inst: Instance, s: int, t: int, cap: float) -> float:
    """Least idle between the device's first start and its first op of stage ``t`` (module doc)."""
    m = inst.microbatches
    f = inst.duration["F"]
    gap = sum(f[r] + inst.link(r, r + 1) for r in range(s, t))
    df_s, df_t = inst.delta["F"][s], max(inst.delta["F"][t], 0.0)
    n = m if df_s <= 0 or not math.isfinite(cap) else min(m, math.floor(cap_with_slack((cap - df_t) / df_s)))
    return max(0.0, gap - max(n, 0) * f[s])


def _tail_idle(inst: Instance, s: int, t: int, cap: float) -> float:
    """Least idle between the end of the device's last ``B`` of stage ``t`` and its last end."""
    m = inst.microbatches
    b, split = inst.duration["B"], inst.split_backward
    w_s = inst.duration["W"][s] if split else 0.0
    w_t = inst.duration["W"][t] if split else 0.0
    gap = sum(b[r] + inst.link(r + 1, r) for r in range(s + 1, t)) + inst.link(s + 1, s)
    l1 = inst.delta["F"][s]
    l2_s = l1 + inst.delta["B"][s] if split else 0.0
    l2_t = inst.delta["F"][t] + inst.delta["B"][t] if split else 0.0
    if not math.isfinite(cap) or min(l1, l2_s, l2_t) < 0 or l1 <= 0:
        cap, l1, l2_s, l2_t = math.inf, 0.0, 0.0, 0.0  # no usable memory argument: counts up to m
    best = 0.0
    a_most = m if l1 <= 0 else min(m, math.floor(cap_with_slack(cap / l1)))
    for a in range(1, max(1, a_most) + 1):
        room = cap - a * l1
        # fractional knapsack over pending W(s) (b <= m - a) and W(t) (c <= m), best ratio first
        items = sorted(((w_s, l2_s, m - a), (w_t, l2_t, m)), key=lambda x: -(x[0] / x[1]) if x[1] > 0 else -math.inf)
        work = a * (b[s] + w_s)
        for dur, hold, most in items:
            n = _count(room, 0.0, hold, most)
            work += n * dur
            room -= n * hold if hold > 0 else 0.0
        best = max(best, work)
    return max(0.0, gap + b[s] + w_s - best)


def v_turn_spans(inst: Instance) -> list[float]:
    """Per device: work + head idle + tail idle, a lower bound on its span (0 when not a V)."""
    p = inst.devices
    if inst.placement != "v" or inst.stages_per_device != 2 or inst.num_stages != 2 * p:
        return [0.0] * p
    work = inst.device_work()
    out = []
    for d in range(p):
        s, t = d, 2 * p - 1 - d
        cap = inst.limit[d]
        out.append(work[d] + _head_idle(inst, s, t, cap) + _tail_idle(inst, s, t, cap))
    return out


def v_turn_bound(inst: Instance) -> float:
    """The V-turn bound for the problem's objective: the largest device span, plus (makespan) the
    earliest its window can open, the forward arrival at its chunk-0 stage."""
    spans = v_turn_spans(inst)
    if inst.placement != "v" or inst.objective == "stage_span":
        return max(spans, default=0.0)
    arrive = 0.0
    best = 0.0
    for d, span in enumerate(spans):
        best = max(best, arrive + span)
        arrive += inst.duration["F"][d] + inst.link(d, d + 1)
    return best

"""The turn relay: a device's last chunk-1 forward waits for what its cap made it finish first.

Why: on the V placement at tight caps the answers idle far more than every one-device bound says
(issue 12, target 2). HiGHS's proven optima of small cases show where from: with every cap removed
but the *turn* device's (``p - 1``, which holds stages ``p - 1`` and ``p``) the optimum is unchanged,
with that one removed it drops to the closed forms. The turn device can keep only a few
microbatches in flight between its two forwards and their backwards, so before it may start the
last microbatch's chunk-1 forward it must have run nearly all of everyone else's backwards and
weight gradients; the last microbatch then still has the whole way up and back down the V to go.
Device 0's span covers the trip down to the turn device, that work, and the trip back.

**The count.** Device ``e`` of the V holds stage ``s = e`` (chunk 0) and ``t = 2p - 1 - e``
(chunk 1). Every level is non-negative on both (``l1 = dF > 0``, ``l2 = dF + dB >= 0`` after B,
``dF + dB + dW >= 0`` after W). Let ``tau`` be the start of the last ``F(t, .)`` on ``e`` (microbatch
``z``; no microbatch order is assumed). Every other microbatch ``j`` has started ``F(t, j)``, hence
``F(s, j)``, before ``tau``, and so has ``z`` its ``F(s, z)``. Ops on a device do not overlap, so an
op of ``e`` that started before ``tau`` has ended by then, and the level the validator checks at
``F(t, z)``'s start (positive deltas count from an op's start, negative ones from its end;
no B runs, so no transient) is, per microbatch: ``z`` holds ``l1_s + l1_t``; ``j`` holds

- ``l1_s + l1_t`` if ``B(t, j)`` has not ended (then ``B(s, j)``, both Ws neither): it still owes
  ``B_t + B_s + W_t + W_s`` on ``e``;
- ``l1_s`` (+ ``l2_t`` while ``W(t, j)`` is pending) if ``B(t, j)`` ended but ``B(s, j)`` did not:
  it owes ``B_s + W_s`` (+ ``W_t``);
- ``l2_s`` and/or ``l2_t`` for each of its pending Ws once both Bs ended: it owes those Ws;
- at least 0 once everything ran.

The levels sum to at most the cap, so the work ``e`` still owes others at ``tau`` is at most the
optimum of the LP ``max sum n_k w_k`` over these states ``k`` (holding ``h_k``, owed work ``w_k``),
``sum n_k h_k <= cap - l1_s - l1_t``, ``sum n_k <= m - 1``, ``n >= 0``: a relaxation of the integer
choice, so still an upper bound (:func:`owed_work`). Everything else of ``e`` except ``z``'s own
``F_t, B_t, B_s, W_t, W_s`` ran before ``tau``, one op at a time after ``e``'s first start.

**The bound.** ``e``'s first op is some ``F(s, j)``, at least the forward chain from ``F(s_d, j)``
after device ``d``'s first start for any ``d <= e`` (``s_d <= s``). After ``tau``, ``z``'s chain runs
from ``F(t, z)`` up the V and back down to its last op on ``d`` (``W(s_d, z)``, or ``B(s_d, z)``
fused), which ``t_d >= t`` and ``s_d <= s`` put after ``F(t, z)``. So

``span_d >= chain(F(s_d) -> F(s)) + done_e + chain(F(t) start -> end of z's last op on d)``,

``done_e`` = ``e``'s work minus ``z``'s five ops above minus the owed work; for the makespan the
first term is ``F(s)``'s head and the last runs to the end of ``z``'s chain. On 1.5B, p = 4, m = 12
at 1p (``e = 3``, ``d = 0``): 29.59 + 432.38 + 119.46 = 581.43, where the one-device bounds give 554.95
(the proof is the count; ``tests/solver/test_turn_relay_bound.py`` checks it against HiGHS optima).
Other placements, dual, overlapped pairs or a negative level: 0.
"""

from __future__ import annotations

import math
from itertools import combinations

from ..core.instance import Instance, OpId
from ..core.tolerance import cap_with_slack
from .chain import OpClass, op_classes


def owed_work(states: list[tuple[float, float]], room: float, count: int) -> float:
    """``max sum n_k w_k`` s.t. ``sum n_k h_k <= room``, ``sum n_k <= count``, ``n >= 0`` for
    ``states`` = [(h_k, w_k)] with ``h_k >= 0``: the LP optimum, at a vertex with at most two
    non-zero ``n_k`` (two constraints), so trying every single state and pair is exact."""
    if count <= 0:
        return 0.0
    best = 0.0
    for h, w in states:  # one state: as many as the room and the count allow
        n = float(count) if h <= 0 else min(float(count), room / h)
        best = max(best, n * w)
    for (ha, wa), (hb, wb) in combinations(states, 2):  # two states, both constraints tight
        if ha == hb:
            continue
        na = (room - hb * count) / (ha - hb)
        nb = count - na
        if na >= 0 and nb >= 0:
            best = max(best, na * wa + nb * wb)
    return best


def _level(level: float, scale: float) -> float:
    """A memory level with float noise around 0 (``0.37 - 0.37``) read as 0, so a W that frees exactly
    what is left counts as non-negative; a clearly negative level stays negative."""
    return 0.0 if abs(level) <= 1e-9 * max(1.0, abs(scale)) else level


def _states(inst: Instance, s: int, t: int) -> list[tuple[float, float]] | None:
    """(holding at ``tau``, work still owed on the device) of another microbatch, per state (module
    docstring); None when some level is negative (then other microbatches could make room)."""
    df, db = inst.delta["F"], inst.delta["B"]
    b = inst.duration["B"]
    l1 = {x: df[x] for x in (s, t)}
    l2 = {x: _level(df[x] + db[x], df[x]) for x in (s, t)}
    if min(l1.values()) <= 0 or min(l2.values()) < 0:
        return None
    if not inst.split_backward:  # after its B a stage holds l2 >= 0 for good: count it as 0
        return [(l1[s] + l1[t], b[t] + b[s]), (l1[s], b[s])]
    dw, w = inst.delta["W"], inst.duration["W"]
    if min(_level(l2[x] + dw[x], df[x]) for x in (s, t)) < 0:
        return None
    return [
        (l1[s] + l1[t], b[t] + b[s] + w[t] + w[s]),  # B(t) not ended
        (l1[s] + l2[t], b[s] + w[s] + w[t]),  # B(t) ended, B(s) not, W(t) pending
        (l1[s], b[s] + w[s]),  # B(t) and W(t) ended, B(s) not
        (l2[s] + l2[t], w[s] + w[t]),  # both Bs ended, both Ws pending
        (l2[s], w[s]),
        (l2[t], w[t]),
    ]


def _relays(inst: Instance) -> tuple[dict[OpId, OpClass], list[tuple[int, float]]]:
    """The chain classes and, per relay device ``e`` where the count applies, the least work ``e`` has
    run when its last chunk-1 forward starts; nothing off the V (two stages a device, no dual, no
    overlapped pairs)."""
    p = inst.devices
    if (inst.placement != "v" or inst.stages_per_device != 2 or inst.num_stages != 2 * p or inst.dual
            or inst.overlap is not None or inst.microbatches < 1):
        return {}, []
    work = inst.device_work()
    done = [(e, x) for e in range(p) if (x := _done_before_last_turn(inst, e, work[e])) is not None]
    return ({c.op: c for c in op_classes(inst)} if done else {}), done


def turn_relay_spans(inst: Instance) -> list[float]:
    """Per device ``d``: the largest span bound over relay devices ``e >= d`` (0 when it does not apply)."""
    p = inst.devices
    out = [0.0] * p
    classes, relays = _relays(inst)
    last = "W" if inst.split_backward else "B"
    for e, done in relays:
        s, t = e, 2 * p - 1 - e
        for d in range(e + 1):
            reach = classes[OpId("F", s, 0)].head - classes[OpId("F", d, 0)].head
            end = classes[OpId(last, d, 0)]
            back = end.head + end.duration - classes[OpId("F", t, 0)].head
            out[d] = max(out[d], reach + done + back)
    return out


def _done_before_last_turn(inst: Instance, e: int, work: float) -> float | None:
    """Least work device ``e`` has run when its last chunk-1 forward starts; None if it does not apply."""
    p, m = inst.devices, inst.microbatches
    cap = inst.memory_cap(e)
    s, t = e, 2 * p - 1 - e
    states = _states(inst, s, t)
    if states is None or not math.isfinite(cap):
        return None
    room = cap_with_slack(cap) - inst.delta["F"][s] - inst.delta["F"][t]
    if room < 0:
        return None  # not even the last microbatch fits: infeasible, another check says so
    own = sum(inst.duration[k][x] for k in inst.kinds for x in (s, t)) - inst.duration["F"][s]
    return work - own - owed_work(states, room, m - 1)


def turn_relay_bound(inst: Instance) -> float:
    """The turn relay for the problem's objective: the largest device span, or (makespan) the
    relay from time 0 (``F(s)``'s head) through ``e``'s done work to the end of ``z``'s chain."""
    if inst.objective == "stage_span":
        return max(turn_relay_spans(inst), default=0.0)
    classes, relays = _relays(inst)
    best = 0.0
    for e, done in relays:
        turn = classes[OpId("F", 2 * inst.devices - 1 - e, 0)]
        best = max(best, classes[OpId("F", e, 0)].head + done + turn.duration + turn.tail)
    return best

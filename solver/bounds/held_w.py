"""Held Ws under a memory cap: how many Ws a stage can still owe when its last B ends.

Why: a late stage that defers its Ws past its last B ends with no tail of its own, so the one-machine
bounds of :mod:`.analytic` let its device finish the backward early and leave the Ws for the end. A
tight cap forbids deferring many: each deferred W keeps its microbatch's activations.

**The count.** Stage ``s`` with ``dF > 0`` and ``l2 = dF + dB >= 0`` (what a microbatch holds from its
B's end to its W), every stage of its device holding ``>= 0`` at all times (``dF >= 0``, ``dF + dB >=
0``: the validator's level is then a sum of non-negative holds), cap ``L`` (the problem's, transients
aside: none is live at an F). Let ``t`` be the start of the stage's last F (microbatch ``z``) and ``T``
the end of its last B. A W still to run at ``T`` belongs to a microbatch whose B ended (i) before
``t``: at ``t`` it holds ``l2``; or (ii) after ``t``: at ``t`` it holds ``dF`` (its F started before
``z``'s or is ``z``'s). ``z`` itself is in (ii). The validator checks the level when ``F(s, z)`` takes
its memory, so ``a · dF + b · l2 <= L`` with ``a = #(ii) >= 1``, ``b = #(i)``, and the Ws owed at ``T``
are at most ``max_{a >= 1, a · dF <= L} a + floor((L − a · dF) / l2)`` (and ``m``). When ``dB > 0`` the
last B's own start is checked too (all owed Ws then hold ``l2``): at most ``floor(L / l2)``; when ``dB
<= 0``, ``l2 <= dF`` and the count above is already at most that. Trading one (ii) for (i) frees
``dF − l2``, so with ``dF >= l2`` the maximum is at ``a = 1`` and with ``dF < l2`` it is ``floor(L /
l2)``: ``K = min(m, floor(L / l2), 1 + floor((L − dF) / l2))``.

**The bound.** All ``m`` Fs and Bs of the stage and its other ``m − K`` Ws end by ``T`` and start no
earlier than the stage's F head (or, the Bs and Ws alone, its B head), on one device:
``T >= head(F_s) + m (F + B) + (m − K) W``. Alone on its device the stage also pays the ramp: before
its first B starts (at least ``ρ = head(B_s) − head(F_s)`` after its first F) it can run only Fs, each
still holding ``dF``, so at most ``K1 = floor(L / dF)`` of them, and ``T >= head(F_s) + max(m F, ρ + (m
− K1) F) + m B + (m − K) W`` (as the plan bound's ramp, :mod:`pipesched.solver.planning.lanes`);
after the last B its microbatch's descendants follow:
``makespan >= T + tail(B_s)`` (the backward below ``s`` and ``W_0``, or ``W_s``). On the 8B, s = 8k,
p = 8 tight plan (last stage: ``dF`` 9.36, ``l2`` 5.20, ``L`` 27.89, so ``K = 4`` of 32) this is
6206.5, the schedule ``auto`` finds; ``floor(L / l2) = 5`` alone gives ~6160.

Fused backward (no W) or uncapped: 0. The stage_span objective gains nothing here: after a one-stage
device's last B only its own Ws remain, so the span is its work at most.
"""

from __future__ import annotations

import math

from ..core.instance import Instance, OpId
from ..core.tolerance import cap_with_slack
from .chain import op_classes


def owed_ws(df: float, l2: float, room: float, m: int) -> int:
    """Most Ws a stage can still owe when its last B ends (module docstring), ``m`` when memory does
    not bound it. ``room`` is the cap with the validator's slack; counts err upwards (float noise)."""
    if l2 <= 0:
        return m
    most = min(m, math.floor(room / l2 * (1 + 1e-9)))
    if df <= 0:
        return most  # then dB > 0: the last B's start is checked
    if df > room:
        return m  # not even one F fits: infeasible, nothing to add
    return min(most, 1 + math.floor((room - df) / l2 * (1 + 1e-9)))


def held_w_bound(inst: Instance) -> float:
    """The makespan bound of the module docstring: the largest over stages; 0 when it does not apply."""
    if not inst.split_backward or inst.objective != "makespan" or inst.dual or inst.overlap is not None:
        return 0.0
    df, db, w = inst.delta["F"], inst.delta["B"], inst.duration["W"]
    f, b = inst.duration["F"], inst.duration["B"]
    by_op = {c.op: c for c in op_classes(inst)}
    head_f = [by_op[OpId("F", s, 0)].head for s in range(inst.num_stages)]
    head_b = [by_op[OpId("B", s, 0)].head for s in range(inst.num_stages)]
    tail = [by_op[OpId("B", s, 0)].tail for s in range(inst.num_stages)]  # the backward below, a W there
    best = 0.0
    for d, stages in enumerate(inst.stages_of_device):
        cap = inst.memory_cap(d)
        if not stages or not math.isfinite(cap):
            continue
        if any(df[s] < 0 or df[s] + db[s] < 0 for s in stages):
            continue  # another microbatch could make room
        room = cap_with_slack(cap)
        for s in stages:
            m = len(inst.stage_microbatches(s))
            k = owed_ws(df[s], df[s] + db[s], room, m)
            if k >= m:
                continue
            fs = m * f[s]  # the Fs before the last B, from the stage's F head on
            if len(stages) == 1 and df[s] > 0:  # the ramp: <= k1 Fs before the first B, idle otherwise
                k1 = min(m, math.floor(room / df[s] * (1 + 1e-9)))
                fs = max(fs, head_b[s] - head_f[s] + (m - k1) * f[s])
            last_b = max(head_f[s] + fs + m * b[s], head_b[s] + m * b[s]) + (m - k) * w[s]
            best = max(best, last_b + tail[s])
    return best

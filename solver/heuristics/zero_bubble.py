"""The zero-bubble paper's automatic scheduling heuristic, as a memory-aware list scheduler.

Qi et al., "Zero Bubble Pipeline Parallelism" (ICLR 2024), section 3 (automatic scheduling):
1. warm-up: each stage runs as many forwards as the memory limit (and a cap) allows before its
   first backward, so the first B arrives into as little idle time as possible;
2. steady state: B and F alternate, B first (it frees memory and feeds the stage below);
3. W fills bubbles: it runs when nothing else is ready and (variant ``fits``) the next known
   arrival leaves room for it, or when the memory limit blocks a forward;
4. remaining Ws run at the end.
The paper tries several warm-up sizes and keeps the best; :func:`best_zb_order` does the same
over a small grid of :class:`Policy` values, timing each order with the simulator.

The scheduler is event driven over all devices at once: the device whose next decision comes
first decides next, so every op that could be ready at that moment is already known.
"""

from __future__ import annotations

import math
import time

from ..budget import GRID_OPS_PER_SECOND, REFINE_POLICIES, note_wall_cut
from ..core.instance import Instance, OpId
from ..core.schedule import Order
from ..core.tolerance import EVENT_TOL, cap_with_slack
from ..timing.retime import Incumbent, compact, order_score
from ..timing.simulate import DeadlockError
from .listsched.engine import run
from .zb_policies import Policy, policies
from .zb_refine import refine_scale


def zb_order(inst: Instance, policy: Policy) -> Order:
    """Per-device order built by the heuristic under ``policy``; raises DeadlockError if stuck.

    Hot loop (issue 12: 98k ops): flat lists indexed ``stage * m + microbatch``, memory caps with
    their float slack added once (:func:`cap_with_slack`), and a device's decision is kept from the
    moment it is pushed until it runs (no state it reads changes in between: every change pushes
    the device again), so each op is decided once rather than twice.
    """
    p, m, S = inst.devices, inst.microbatches, inst.num_stages
    last = S - 1
    split = inst.split_backward
    stages_of = inst.stages_of_device
    dos = inst.device_of_stage
    dur_f, dur_b = inst.duration["F"], inst.duration["B"]
    dur_w = inst.duration.get("W", (0.0,) * S)
    d_f, d_b = inst.delta["F"], inst.delta["B"]
    d_w = inst.delta.get("W", (0.0,) * S)
    pos_f = [max(x, 0.0) for x in d_f]
    pos_b = [max(x, 0.0) for x in d_b]
    up = [inst.link(s - 1, s) if s > 0 else 0.0 for s in range(S)]
    down = [inst.link(s + 1, s) if s < last else 0.0 for s in range(S)]
    lim = [cap_with_slack(x) for x in inst.limit]
    nf, nb, nw = [0] * S, [0] * S, [0] * S
    f_end: list[float | None] = [None] * (S * m)
    b_end: list[float | None] = [None] * (S * m)
    free = [0.0] * p
    live = [0.0] * p
    order: Order = [[] for _ in range(p)]
    higher = [sum(pos_f[t] for t in stages_of[dos[s]] if t > s) for s in range(S)]
    cap = [math.inf if policy.extra is None else max(1, math.ceil(policy.scale * (S - s)) + policy.extra)
           for s in range(S)]
    total = len(inst.kinds) * S * m
    f_first, b_wait, eager = policy.f_first, policy.b_wait, policy.w == "eager"
    inf = math.inf

    def choose(d: int) -> tuple[float, int | None]:
        """(time, 3 stage + kind) of device d's next op (kind 0 F, 1 B, 2 W), or (time to look again, None)."""
        t = free[d]
        tt = t + EVENT_TOL
        lv, room = live[d], lim[d]
        soon_b = nxt = inf
        now_b = now_f = -1  # stage of the best op ready now
        now_b_r = now_f_r = inf
        w_s = -1
        blocked = False
        for s in stages_of[d]:
            i = nb[s]
            if i < m:
                e = f_end[s * m + i] if s == last else b_end[(s + 1) * m + i]
                if e is not None and lv + pos_b[s] <= room:
                    r = e if s == last else e + down[s]
                    if r < soon_b:
                        soon_b = r
                    if r <= tt and (r < now_b_r or (r == now_b_r and s > now_b)):
                        now_b_r, now_b = r, s
            i = nf[s]
            if i < m:
                if s == 0:
                    r = 0.0
                else:
                    e = f_end[(s - 1) * m + i]
                    r = None if e is None else e + up[s]
                if r is not None:
                    inflight = i - nb[s]
                    if inflight < cap[s] and lv + higher[s] + pos_f[s] <= room:
                        if r < nxt:
                            nxt = r
                        if r <= tt and (r < now_f_r or (r == now_f_r and s < now_f)):
                            now_f_r, now_f = r, s
                    elif inflight < cap[s]:
                        blocked = True
            if split and nw[s] < nb[s] and s > w_s:
                w_s = s
        if soon_b < nxt:
            nxt = soon_b
        for kind, s in ((0, now_f), (1, now_b)) if f_first else ((1, now_b), (0, now_f)):
            if s >= 0:
                if b_wait and kind == 0 and tt < soon_b < t + dur_f[s] - EVENT_TOL:
                    return soon_b, None
                return t, 3 * s + kind
        if w_s >= 0:
            if b_wait and tt < soon_b < t + dur_w[w_s] - EVENT_TOL and not blocked:
                return soon_b, None
            if blocked or eager or nxt == inf or nxt - t >= dur_w[w_s] - EVENT_TOL:
                return t, 3 * w_s + 2
        return nxt, None

    counts, durs, deltas, ends = (nf, nb, nw), (dur_f, dur_b, dur_w), (d_f, d_b, d_w), (f_end, b_end)
    names = ("F", "B", "W")
    # the device an op's end may unblock besides its own: the next stage's for F, the previous one's for B
    wakes = ([(d,) if s == last or dos[s + 1] == d else (d, dos[s + 1]) for s, d in enumerate(dos)],
             [(d,) if s == 0 or dos[s - 1] == d else (d, dos[s - 1]) for s, d in enumerate(dos)],
             [(d,) for d in dos])

    def commit(d: int, start: float, code: int) -> tuple[float, tuple[int, ...]]:
        s, k = divmod(code, 3)
        count = counts[k]
        i = count[s]
        count[s] = i + 1
        end = start + durs[k][s]
        live[d] += deltas[k][s]
        order[d].append(OpId(names[k], s, i))  # type: ignore[arg-type]
        if k < 2:
            ends[k][s * m + i] = end
        return end, wakes[k][s]

    done = run(p, free, choose, commit, keep=True)
    if done != total:
        raise DeadlockError(f"zb heuristic {policy} stuck after {done} of {total} ops")
    return order


def zb_candidates(inst: Instance, seconds: float | None = None, deadline: float | None = None,
                  keep: int | None = None) -> list[Incumbent]:
    """Every policy of the grid (sized for the nominal budget ``seconds``) that yields an order,
    timed by :func:`compact`, best first; only the ``keep`` best are held at any time (each order of a
    98k-op problem is tens of MB). ``deadline`` (a ``perf_counter`` time) is only a safety
    net for an overloaded machine: once passed, the grid stops as soon as it has one order."""
    if inst.dual:  # the grid walks one chain through every stage; dual chains stop at each copy's end
        return []
    out = []
    grid = policies(inst, seconds)
    for k, pol in enumerate(grid):
        if out and deadline is not None and time.perf_counter() > deadline:
            note_wall_cut("zero-bubble grid")
            break
        try:
            order = zb_order(inst, pol)
        except DeadlockError:
            continue
        start = compact(inst, order)
        value, span = order_score(inst, order, start)
        out.append((value, span, k, Incumbent(order, start, value)))
        out = sorted(out, key=lambda c: c[:3])[:keep]
        del order, start
    trials = refine_trials(inst, seconds, len(grid))
    if out and trials and not (deadline is not None and time.perf_counter() > deadline):
        value, span, k, _ = out[0]
        found = refine_scale(inst, grid[k], (value, span), trials, zb_order)
        out = sorted(out + [(v, sp, len(grid) + i, inc) for i, (v, sp, inc) in enumerate(found)],
                     key=lambda c: c[:3])[:keep]
    return [c[3] for c in out]


def refine_trials(inst: Instance, seconds: float | None, grid_size: int) -> int:
    """Policies the scale search may add: what the nominal budget affords beyond the grid (counted at
    the grid's rate), at most :data:`~pipesched.solver.budget.REFINE_POLICIES`; none without a budget."""
    if seconds is None:
        return 0
    affordable = int(seconds * GRID_OPS_PER_SECOND / max(1, inst.num_ops)) - grid_size
    return max(0, min(REFINE_POLICIES, affordable))

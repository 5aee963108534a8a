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

import heapq
import math
import time

from ..core.instance import Instance, OpId
from ..core.metrics import makespan, objective_value
from ..core.schedule import Order
from ..core.tolerance import within_cap
from ..timing.retime import Incumbent, compact
from ..timing.simulate import DeadlockError
from .zb_policies import Policy, policies

_EPS = 1e-9


def _fits(inst: Instance, d: int, live: float, delta: float) -> bool:
    cap = inst.limit[d]
    return within_cap(live + max(delta, 0.0), cap)


def zb_order(inst: Instance, policy: Policy) -> Order:
    """Per-device order built by the heuristic under ``policy``; raises DeadlockError if stuck."""
    p, m, S = inst.devices, inst.microbatches, inst.num_stages
    split = inst.split_backward
    stages_of = inst.stages_of_device
    nf, nb, nw = [0] * S, [0] * S, [0] * S
    f_end = [[math.nan] * m for _ in range(S)]
    b_end = [[math.nan] * m for _ in range(S)]
    free = [0.0] * p
    live = [0.0] * p
    order: Order = [[] for _ in range(p)]
    higher = [sum(max(0.0, inst.delta["F"][t]) for t in stages_of[inst.device_of_stage[s]] if t > s)
              for s in range(S)]
    cap = [math.inf if policy.extra is None else max(1, math.ceil(policy.scale * (S - s)) + policy.extra)
           for s in range(S)]
    total = len(inst.kinds) * S * m
    done = 0

    def ready_f(s: int) -> float | None:
        i = nf[s]
        if i >= m:
            return None
        if s == 0:
            return 0.0
        e = f_end[s - 1][i]
        return None if math.isnan(e) else e + inst.link(s - 1, s)

    def ready_b(s: int) -> float | None:
        i = nb[s]
        if i >= m:
            return None
        e = f_end[s][i] if s == S - 1 else b_end[s + 1][i]
        if math.isnan(e):
            return None
        return e if s == S - 1 else e + inst.link(s + 1, s)

    def f_allowed(d: int, s: int) -> bool:
        if nf[s] - nb[s] >= cap[s]:
            return False
        return _fits(inst, d, live[d] + higher[s], inst.delta["F"][s])

    def choose(d: int) -> tuple[float, OpId | None]:
        """(time, op) for device d's next op, or (time to look again, None)."""
        t = free[d]
        bs, fs, ws, blocked = [], [], [], False
        for s in stages_of[d]:
            r = ready_b(s)
            if r is not None and _fits(inst, d, live[d], inst.delta["B"][s]):
                bs.append((r, -s, OpId("B", s, nb[s])))
            r = ready_f(s)
            if r is not None:
                if f_allowed(d, s):
                    fs.append((r, s, OpId("F", s, nf[s])))
                elif nf[s] - nb[s] < cap[s]:
                    blocked = True
            if split and nw[s] < nb[s]:
                ws.append((-s, OpId("W", s, nw[s])))
        now_b = [c for c in bs if c[0] <= t + _EPS]
        now_f = [c for c in fs if c[0] <= t + _EPS]
        first = (now_f, now_b) if policy.f_first else (now_b, now_f)
        soon_b = min([c[0] for c in bs], default=math.inf)
        for group in first:
            if group:
                op = min(group)[2]
                if policy.b_wait and op.kind == "F" and t + _EPS < soon_b < t + inst.cost(op) - _EPS:
                    return soon_b, None
                return t, op
        if ws:
            nxt = min([c[0] for c in bs + fs], default=None)
            w_op = min(ws)[1]
            if policy.b_wait and t + _EPS < soon_b < t + inst.cost(w_op) - _EPS and not blocked:
                return soon_b, None
            if blocked or policy.w == "eager" or nxt is None or nxt - t >= inst.cost(w_op) - _EPS:
                return t, w_op
        nxt = min([c[0] for c in bs + fs], default=None)
        return (math.inf, None) if nxt is None else (nxt, None)

    heap: list[tuple[float, int, int]] = []
    version = [0] * p

    def push(d: int) -> None:
        version[d] += 1
        t, _ = choose(d)
        if t < math.inf:
            heapq.heappush(heap, (max(t, free[d]), d, version[d]))

    for d in range(p):
        push(d)
    while heap:
        t, d, ver = heapq.heappop(heap)
        if ver != version[d]:
            continue
        free[d] = max(free[d], t)
        when, op = choose(d)
        if op is None:
            if when < math.inf:
                heapq.heappush(heap, (when, d, version[d]))
            continue
        start = when
        end = start + inst.cost(op)
        free[d] = end
        live[d] += inst.mem(op)
        order[d].append(op)
        done += 1
        k, s, i = op
        touched = {d}
        if k == "F":
            nf[s] += 1
            f_end[s][i] = end
            touched.add(inst.device_of_stage[s + 1] if s < S - 1 else d)
        elif k == "B":
            nb[s] += 1
            b_end[s][i] = end
            if s > 0:
                touched.add(inst.device_of_stage[s - 1])
        else:
            nw[s] += 1
        for e in sorted(touched):
            push(e)
    if done != total:
        raise DeadlockError(f"zb heuristic {policy} stuck after {done} of {total} ops")
    return order


def zb_candidates(inst: Instance, seconds: float | None = None, deadline: float | None = None) -> list[Incumbent]:
    """Every policy of the grid (sized for the nominal budget ``seconds``) that yields an order,
    timed by :func:`compact`, best first. ``deadline`` (a ``perf_counter`` time) is only a safety
    net for an overloaded machine: once passed, the grid stops as soon as it has one order."""
    out = []
    for k, pol in enumerate(policies(inst, seconds)):
        if out and deadline is not None and time.perf_counter() > deadline:
            break
        try:
            order = zb_order(inst, pol)
        except DeadlockError:
            continue
        start = compact(inst, order)
        value = objective_value(inst, start)
        out.append((value, makespan(inst, start), k, Incumbent(order, start, value)))
    out.sort(key=lambda c: c[:3])
    return [c[3] for c in out]

"""Local search on a per-device order: let a forward or backward jump ahead of a W that delays it.

W (the weight gradient) is the one op nothing on the critical path waits for, so a W that is
still running when an F or B becomes ready, with that F or B next in the device's order, is a
delay the order imposed for no reason. Swapping the two starts the F or B on arrival, and a
chain of such delays along the last microbatch's backward is exactly what keeps the zero-bubble
heuristics a few tenths of a millisecond above the relay bound. Each accepted swap strictly
improves ``(objective, makespan)``, so the search ends; it is deterministic. Delays are tried
latest first: the ends of the device windows decide the objective (measured on that case: 30
trials reach the bound, against about 200 in device order).
Memory depends only on each device's order (ops on a device run one at a time), so a swap is
checked by prefix sums of the deltas.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..budget import SHARED_SLOWDOWN, note_wall_cut, retime_cost, trials_for
from ..core.instance import Instance, OpId
from ..core.metrics import objective_value
from ..core.schedule import Order
from ..core.tolerance import slack, within_cap
from ..timing.retime import Incumbent, compact, order_score, retime
from ..timing.simulate import DeadlockError
from .search import Search


def fits_memory(inst: Instance, ops: Sequence[OpId], device: int) -> bool:
    """Whether the device's running total of memory deltas stays within its limit."""
    cap = inst.limit[device]
    if not math.isfinite(cap):
        return True
    level = 0.0
    for op in ops:
        level += inst.mem(op)
        if not within_cap(level, cap):
            return False
    return True


def delayed_by_w(inst: Instance, order: Order, start: Mapping[OpId, float]) -> list[tuple[int, int]]:
    """``(device, i)`` where ``order[device][i]`` is a W still running when the next op (an F or B)
    was ready, so the order alone made that op wait."""
    out = []
    for d, ops in enumerate(order):
        for i in range(len(ops) - 1):
            w, nxt = ops[i], ops[i + 1]
            if w.kind != "W" or nxt.kind == "W":
                continue
            w_end = start[w] + inst.cost(w)
            ready = max((start[p] + inst.cost(p) + lag for p, lag in inst.predecessors(nxt)), default=0.0)
            if ready < w_end - slack(w_end):  # nothing depends on a W, so the wait is the order's
                out.append((d, i))
    return out


def _levels(inst: Instance, ops: Sequence[OpId]) -> list[float] | None:
    """Running memory level before each op of a device's order (its prefix sums, the same additions
    :func:`fits_memory` makes), or None when the order itself breaks the cap (then each trial is
    checked in full)."""
    if not math.isfinite(inst.limit[inst.device(ops[0])] if ops else math.inf):
        return []
    cap = inst.limit[inst.device(ops[0])]
    level, out = 0.0, []
    for op in ops:
        out.append(level)
        level += inst.mem(op)
        if not within_cap(level, cap):
            return None
    return out


def _swap_fits(inst: Instance, ops: Sequence[OpId], levels: list[float] | None, i: int, d: int) -> bool:
    """Whether swapping ``ops[i]`` and ``ops[i + 1]`` keeps device ``d`` within its cap. With the
    order's own levels known to fit, only the level after the op moved first changes (the level after
    the pair is the same sum), so one comparison decides what :func:`fits_memory` would (issue 12:
    the full re-check per candidate made the search quadratic at 24k ops)."""
    if levels is None:
        trial = list(ops)
        trial[i], trial[i + 1] = trial[i + 1], trial[i]
        return fits_memory(inst, trial, d)
    if not levels:  # no cap
        return True
    return within_cap(levels[i] + inst.mem(ops[i + 1]), inst.limit[d])


def _score(inst: Instance, order: Order, start: Mapping[OpId, float]) -> tuple[float, float]:
    return order_score(inst, order, start)


def polish(inst: Instance, order: Order, start: Mapping[OpId, float] | None = None, *,
           max_trials: int = 1000, deadline: float = math.inf) -> tuple[Order, dict[OpId, float]]:
    """Swap W-delayed ops forward while ``(objective, makespan)`` strictly improves.

    ``max_trials`` re-timings at most (the deterministic budget, see :func:`trials_for`);
    ``deadline`` (``time.perf_counter()``) is only the wall-clock safety net. Returns the order
    and its times (the input's when nothing improves)."""
    order = [list(ops) for ops in order]
    times = dict(start) if start is not None else compact(inst, order)
    best = _score(inst, order, times)
    trials = 0
    while trials < max_trials and time.perf_counter() < deadline:
        latest_first = sorted(delayed_by_w(inst, order, times), key=lambda di: -times[order[di[0]][di[1]]])
        levels: dict[int, list[float] | None] = {}
        for d, i in latest_first:
            if trials >= max_trials or time.perf_counter() >= deadline:
                break
            if d not in levels:
                levels[d] = _levels(inst, order[d])
            if not _swap_fits(inst, order[d], levels[d], i, d):
                continue
            trial = list(order[d])
            trial[i], trial[i + 1] = trial[i + 1], trial[i]
            candidate = order[:d] + [trial] + order[d + 1:]
            trials += 1
            try:
                cand_times = compact(inst, candidate)
            except DeadlockError:
                continue
            score = _score(inst, candidate, cand_times)
            if score < best:
                tol = slack(best[0])
                if score[0] < best[0] - tol or score[1] < best[1] - tol:
                    order, times, best = candidate, cand_times, score
                    break
        else:
            break  # a full scan without an improvement: a local optimum
    else:
        if trials < max_trials:  # the loop ended on the clock
            note_wall_cut("local search")
    return order, times


def polished(inst: Instance, inc: Incumbent, seconds: float, deadline: float) -> Incumbent:
    """``inc`` after :func:`polish` with a budget sized for the nominal ``seconds`` (the optimal
    re-timing of an improved order included, when its estimated cost fits half of it)."""
    cost = retime_cost(inst)
    exact = cost <= seconds / 2
    trials = trials_for(inst, seconds - cost if exact else seconds)
    order, times = polish(inst, inc.order, inc.start, max_trials=trials, deadline=deadline)
    value = objective_value(inst, times)
    if value >= inc.objective - slack(inc.objective):
        return inc
    found = Incumbent(order, times, value)
    if not exact:
        return found
    if time.perf_counter() + cost > deadline:
        note_wall_cut("optimal re-timing")
        return found
    try:
        return min((retime(inst, order), found), key=lambda c: c.objective)
    except DeadlockError:
        return found


@dataclass(frozen=True)
class PolishPhase:
    """:func:`polished` on the incumbent with ``share`` of the nominal limit, while the gap is open; its
    wall net is the method's deadline, or ``stop_share`` of the limit from the start."""

    share: float
    stop_share: float | None = None
    name: str = "local search"
    wall_net: bool = False  # polished stops itself

    def applies(self, s: Search) -> bool:
        return s.incumbent is not None and not s.proven

    def estimate(self, s: Search) -> float:
        return 0.0

    def allowance(self, s: Search) -> float:
        return self.share * s.limit

    def run(self, s: Search) -> None:
        assert s.incumbent is not None
        stop = s.budget.deadline if self.stop_share is None else s.t0 + self.stop_share * s.limit
        s.settle(polished(s.inst, s.incumbent, self.allowance(s), stop))
        s.budget.record(self.allowance(s) / SHARED_SLOWDOWN)  # sized for its allowance (it may end sooner)

"""Order local search for tight caps: ops the order made wait jump ahead, trailing Ws move into gaps.

Why (issue 12, target 2): at a cap of 1p the memory leaves a list scheduler little to choose, and
ZB-V's order is hard to beat from scratch; what is left are two kinds of waste an order shows
after timing. (1) An F or B that was ready while the device ran something its order put first
(the W local search of :mod:`.swap_past_w` only looks at a W directly in front): it is moved to
just before the op that was running at its arrival, or just after it. (2) A device that ends on a
pile of Ws deferred too far (the cool-down's gaps between returning backwards hold one W each): its
last W moves back into the latest idle gap it can use. Each accepted move strictly improves
``(objective, makespan)``, so the search ends; trials are counted with the shared
:class:`~.trials.Trials` (the deterministic budget; its clock is only a safety net).
Memory depends only on each device's order and is checked before a trial is spent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..budget import note_wall_cut
from ..core.instance import Instance, OpId
from ..core.schedule import Order
from ..core.tolerance import EVENT_TOL, slack
from ..timing.retime import Incumbent, compact, order_score
from ..timing.simulate import DeadlockError
from .swap_past_w import fits_memory
from .trials import Trials

Move = tuple[int, int, int]  # (device, from position, to position)


def _end(inst: Instance, start: Mapping[OpId, float], op: OpId) -> float:
    return start[op] + inst.cost(op)


def _moves(inst: Instance, order: Order, start: Mapping[OpId, float]) -> list[Move]:
    """Candidate moves, the latest waste first (the ends of the device windows decide the objective)."""
    found: list[tuple[float, Move]] = []
    for d, ops in enumerate(order):
        for j in range(1, len(ops)):
            op = ops[j]
            if op.kind == "W":
                continue
            ready = max((_end(inst, start, q) + lag for q, lag in inst.predecessors(op)), default=0.0)
            if ready >= start[op] - EVENT_TOL:
                continue
            i = j
            while i > 0 and _end(inst, start, ops[i - 1]) > ready + EVENT_TOL:
                i -= 1
            for k in sorted({i, i + 1, j - 1} - {j}, reverse=True):
                if k < j:
                    found.append((-start[op], (d, j, k)))
        j = len(ops)
        while j > 0 and ops[j - 1].kind == "W":  # the trailing Ws, each into the latest gaps after its B
            j -= 1
            w = ops[j]
            own_b = ops.index(OpId("B", w.stage, w.microbatch))
            gaps = [k for k in range(own_b + 1, j) if start[ops[k]] > _end(inst, start, ops[k - 1]) + EVENT_TOL]
            found.extend((-math.inf, (d, j, k)) for k in reversed(gaps[-2:]))  # first: cheap, and they undo the pile
    found.sort(key=lambda c: c[0])  # stable: the trailing Ws in device order, then the latest waits
    return [m for _, m in found]


def improve(inst: Instance, inc: Incumbent, trials: Trials) -> Incumbent:
    """``inc`` after first-improvement moves (module docstring), one of ``trials`` per order timed."""
    order = [list(ops) for ops in inc.order]
    times = dict(inc.start)
    best = order_score(inst, order, times)
    while trials.left > 0 and not trials.cut:
        for d, j, k in _moves(inst, order, times):
            ops = order[d]
            trial = ops[:k] + [ops[j]] + ops[k:j] + ops[j + 1:]
            if not fits_memory(inst, trial, d):
                continue
            if not trials.take():
                break
            cand = order[:d] + [trial] + order[d + 1:]
            try:
                cand_times = compact(inst, cand)
            except DeadlockError:
                continue
            score = order_score(inst, cand, cand_times)
            tol = slack(best[0])
            if score[0] < best[0] - tol or (score[0] <= best[0] + tol and score[1] < best[1] - tol):
                order, times, best = cand, cand_times, score
                break
        else:
            break  # no move improves: a local optimum
    if trials.cut:
        note_wall_cut("V order search")
    if best[0] >= inc.objective - slack(inc.objective):
        return inc
    return Incumbent.of(inst, order, times)

"""Large-neighbourhood search: CP-SAT re-solves a window of the incumbent, the rest of its order fixed.

Why: on the capped models CP-SAT's search on the whole model from a good incumbent rarely improves it
in the seconds a limit leaves (the search space is every order of every device). Fixing the incumbent's
order outside a window of a few devices and a stretch of time leaves a model CP-SAT searches quickly,
and an improvement anywhere improves the whole: the classic LNS of job-shop scheduling (Shaw 1998,
"Using constraint programming and local search methods to solve vehicle routing problems"; OR-Tools'
own LNS workers relax the same way).

A window (:class:`Window`) is a block of adjacent devices and a start position in time (a share of the
incumbent's makespan); on each of its devices it frees a run of ``ops_per_device`` consecutive ops of
the incumbent's order from the first op starting at that position. Outside the runs every device keeps
its order (each op after the one before it); a freed run stays between its neighbours and may be
re-ordered freely. Times are all free, so the timing is re-optimised as well. The model is the full one
(memory, precedences, objective) plus these chains, hinted with the incumbent and bounded above by it,
so an answer is never worse.

Budgets are deterministic: each window's search stops on ``max_deterministic_time`` on one worker, so
the same windows from the same incumbent give the same answers on any machine; the wall clock is only
the net (:func:`pipesched.solver.budget.note_wall_cut`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from ortools.sat.python import cp_model

from ...budget import (
    CPSAT_OVERSHOOT_S,
    PRECEDENCES_OVERSHOOT_S,
    note_wall_cut,
    retime_cost,
)
from ...budget.limit import WINDOW_DTIME_PER_SECOND, WINDOW_LOAD_S_PER_OP
from ...core.instance import Instance, OpId
from ...core.tolerance import slack
from ...timing.retime import Incumbent, retime
from ...timing.simulate import DeadlockError
from .formulation import CpsatModel, OpGraph, build, solved_order
from .run import add_hint, horizon_value, model_lower, solver_parameters
from .scaling import Scaling


@dataclass(frozen=True)
class Window:
    """Devices ``first .. first + width - 1`` (wrapping), from ``position`` (a share of the makespan)
    on, ``ops_per_device`` ops each."""

    first: int
    width: int
    position: float
    ops_per_device: int

    def runs(self, inc: Incumbent) -> dict[int, tuple[int, int]]:
        """Per device of the window, the run ``[i, j)`` of its order the window frees."""
        order = inc.order
        p = len(order)
        t = self.position * max((inc.start[ops[-1]] for ops in order if ops), default=0.0)
        out: dict[int, tuple[int, int]] = {}
        for k in range(min(self.width, p)):
            d = (self.first + k) % p
            ops = order[d]
            i = next((n for n, op in enumerate(ops) if inc.start[op] >= t), len(ops))
            i = max(0, min(i, len(ops) - self.ops_per_device))
            j = min(len(ops), i + self.ops_per_device)
            if j - i >= 2:
                out[d] = (i, j)
        return out


def add_window(cm: CpsatModel, order: list[list[OpId]], runs: dict[int, tuple[int, int]]) -> None:
    """Every device keeps ``order`` outside its freed run ``[i, j)``: consecutive ops outside it in
    sequence, each op of the run after op ``i - 1`` and before op ``j``."""
    model = cm.model
    for d, ops in enumerate(order):
        i, j = runs.get(d, (len(ops), len(ops)))
        for k in range(len(ops) - 1):
            a, b = ops[k], ops[k + 1]
            if k + 1 < i or k >= j:  # both before the run, or both after it (or no run)
                model.add(cm.start[b] >= cm.end(a))
        if i >= len(ops):
            continue
        for op in ops[i:j]:
            if i > 0:
                model.add(cm.start[op] >= cm.end(ops[i - 1]))
            if j < len(ops):
                model.add(cm.start[ops[j]] >= cm.end(op))


#: Least relative gain a window searches for: its model asks for an objective at least this share below
#: the incumbent's, not one unit below it. Why: with a one-unit step CP-SAT's propagation after the hint
#: creeps bounds through the precedence cycles one unit (a millionth of the objective) per pass, in a
#: stretch neither of its clocks looks into: on the zero-bubble paper's p = 8, m = 64, 2p cases one
#: window of a 0.375-unit limit ran 60 s (4.1M integer propagations for 549 branches; given 3 s of wall
#: it still took 15 s) and ``auto`` returned 70 s into a 60 s limit. At 1e-4 the same window is closed
#: (no such gain) in 0.6 s, at 1e-5 it stops at its wall limit. Gains below it are below the 4 decimals
#: the bubble tables print. Re-measured by ``python benchmarks/cpsat_dtime.py --only zb --time-limit 60``
#: (every window's wall against its limit).
WINDOW_MIN_GAIN = 1e-4


@dataclass(frozen=True)
class WindowResult:
    """The best incumbent (never worse), whether CP-SAT searched the window to the end (``complete``:
    no order in it is :data:`WINDOW_MIN_GAIN` better), and the idle seconds the window is counted (from
    the deterministic time it used: :func:`~pipesched.solver.exact.cpsat.run.counted_seconds`)."""

    incumbent: Incumbent
    complete: bool
    counted: float


def window_cost(inst: Instance, seconds: float) -> float:
    """Most idle seconds one window of ``seconds`` nominal search is counted before its answer: setting it
    up (building the model, CP-SAT's load) and its search. Re-timing an answer that improved is counted
    on top (``retime_cost``)."""
    return WINDOW_LOAD_S_PER_OP * inst.num_ops + seconds


def solve_window(inst: Instance, inc: Incumbent, runs: dict[int, tuple[int, int]], *, bound: float,
                 seconds: float, deadline: float) -> WindowResult:
    """CP-SAT on the model with ``inc``'s order fixed outside ``runs``, from ``inc``, for ``seconds``
    nominal idle seconds of search (:data:`~pipesched.solver.budget.limit.WINDOW_DTIME_PER_SECOND` units
    each) on one worker;
    the wall clock stops it at ``deadline`` at the latest, keeping back the re-timing of an improved
    answer."""
    sc = Scaling.of(inst)
    incumbent = sc.up(inc.objective)
    upper = incumbent + 1 - int(incumbent * WINDOW_MIN_GAIN)  # that gain, or nothing
    cm = build(inst, sc, OpGraph.full(inst, sc), horizon=horizon_value(inst, sc, inc.objective),
               lower=model_lower(inst, sc, bound), upper=upper)
    add_hint(cm, inc.start)
    add_window(cm, inc.order, runs)
    overshoot = PRECEDENCES_OVERSHOOT_S if cm.precedences_only else CPSAT_OVERSHOOT_S
    wall = deadline - time.perf_counter() - overshoot - retime_cost(inst)
    built = WINDOW_LOAD_S_PER_OP * inst.num_ops
    if wall <= 0.05:
        note_wall_cut("CP-SAT windows (not started)")
        return WindowResult(inc, False, built)
    dtime = seconds * WINDOW_DTIME_PER_SECOND
    solver = cp_model.CpSolver()
    solver_parameters(solver, wall, 1, dtime=dtime, lp=False, precedences_only=cm.precedences_only,
                      probing=False)
    status = solver.solve(cm.model)
    used = built + solver.deterministic_time / WINDOW_DTIME_PER_SECOND
    complete = status in (cp_model.OPTIMAL, cp_model.INFEASIBLE)
    if not complete and solver.deterministic_time < 0.99 * dtime and solver.wall_time >= 0.99 * solver.parameters.max_time_in_seconds:
        note_wall_cut("CP-SAT windows")
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE) or solver.objective_value >= incumbent:
        return WindowResult(inc, complete, used)  # nothing below the incumbent's own value in model units
    used += retime_cost(inst)
    try:
        cand = retime(inst, solved_order(cm, solver))
    except DeadlockError:
        return WindowResult(inc, complete, used)
    better = cand.objective < inc.objective - slack(inc.objective)
    return WindowResult(cand if better else inc, complete, used)


def windows(inst: Instance, window_ops: int, passes: int) -> list[Window]:
    """Pass ``passes``' cover of the schedule by windows of about ``window_ops`` ops: device blocks of
    width ``min(p, 2)`` and ``min(p, 4)`` stepping by half a block, positions stepping by half a run,
    each pass shifted by a quarter step; ordered to alternate the two ends of the list, so a pass cut
    short by the limit has still reached the whole schedule. No clock and no randomness: the cover is a
    function of the problem's shape and the pass."""
    p = inst.devices
    per_device = max(1, math.ceil(inst.num_ops / p))
    out: list[Window] = []
    for width in sorted({min(p, 2), min(p, 4)}):
        n = max(2, min(per_device, window_ops // width))
        step = max(1, n // 2) / per_device
        shift = (passes % 4) * step / 4
        positions = [shift + k * step for k in range(max(1, math.ceil((1.0 - shift) / step)))]
        starts = range(0, p, max(1, width // 2)) if width < p else range(1)
        out += [Window(d, width, t, n) for t in positions for d in starts]
    half = (len(out) + 1) // 2
    mixed = [w for pair in zip(out[:half], reversed(out[half:]), strict=False) for w in pair]
    return mixed + ([out[half - 1]] if len(out) % 2 else [])

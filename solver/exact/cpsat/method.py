"""Method ``cpsat``: the exact CP-SAT model of :mod:`.formulation`, warm-started and deterministic.

Steps (the issue's measured recipe for making CP-SAT scale on this problem):
1. a warm start (the best order of the zero-bubble heuristic grid, or ``options.hint``), polished by
   the W-delay local search (:mod:`pipesched.solver.heuristics.swap_past_w`);
2. the model with the horizon and ``Z <= incumbent`` from that start, ``Z >=`` the analytic
   bound, every start hinted, presolve off (it expands the memory constraints into huge
   Boolean encodings) and reservoirs never expanded;
3. search with ``interleave_search`` (deterministic whatever ``num_workers``) and a
   *deterministic* time limit, so the same problem gives the same schedule on every run and in
   every process; the wall-clock limit stays as a safety net on a loaded machine;
4. the per-device order of the answer is re-timed exactly by the simulator (:func:`pipesched.solver.timing.retime.compact`,
   or the model's own start times as release dates, whichever is better), then finalized.
"""

from __future__ import annotations

import contextlib
import time

from ...bounds.analytic import lower_bound as analytic_lower_bound
from ...bounds.combinatorial import combinatorial_bound
from ...bounds.feasibility import infeasibility_reason
from ...budget import (
    BUILD_S_PER_OP,
    CPSAT_OVERSHOOT_S,
    DTIME_PER_SECOND,
    FULL_MODEL_OPS,
    POLISH_SHARE,
    finish_margin,
    retime_cost,
)
from ...core.instance import Instance
from ...core.problem import Problem
from ...core.registry import SolveOptions, method
from ...core.schedule import Schedule
from ...heuristics.swap_past_w import polished
from ...heuristics.zero_bubble import zb_candidates
from ...timing.finalize import no_schedule
from ...timing.retime import Incumbent
from ...timing.simulate import DeadlockError
from .run import CpsatResult, finish, solve_model


def warm_start(inst: Instance, hint: Schedule | None, seconds: float | None = None,
               deadline: float | None = None) -> Incumbent | None:
    """The best of the zero-bubble heuristic grid (sized for the nominal ``seconds``; ``deadline`` is
    the wall safety net) and a caller's hint (if it fits this problem)."""
    cands = [Incumbent(c.order, c.start, c.objective) for c in zb_candidates(inst, seconds, deadline)[:1]]
    if hint is not None and hint.ops:
        with contextlib.suppress(DeadlockError, KeyError, ValueError):
            cands.append(Incumbent.of(inst, [list(ops) for ops in hint.order()]))
    return min(cands, key=lambda c: c.objective) if cands else None



@method("cpsat", "OR-Tools CP-SAT, exact: proves optimality when it can. Any placement and memory limit.")
def solve_cpsat(problem: Problem, options: SolveOptions) -> Schedule:
    t0 = time.perf_counter()
    inst = Instance.from_problem(problem)
    reason = infeasibility_reason(inst)
    if reason:
        return no_schedule(problem, "cpsat", "infeasible", reason, solve_time_s=time.perf_counter() - t0)
    inc = warm_start(inst, options.hint, 0.25 * options.time_limit_s, t0 + 0.4 * options.time_limit_s)
    if inc is None:
        return no_schedule(problem, "cpsat", "timeout", "no warm start found a valid order",
                           lower_bound=analytic_lower_bound(inst), solve_time_s=time.perf_counter() - t0)
    inc = polished(inst, inc, POLISH_SHARE * options.time_limit_s, t0 + 0.5 * options.time_limit_s)
    deadline = t0 + options.time_limit_s - finish_margin(inst)
    left = deadline - time.perf_counter()
    closed = inc.objective - combinatorial_bound(inst) <= 1e-9 * max(1.0, inc.objective)
    n_ops = inst.num_ops
    too_big = n_ops > FULL_MODEL_OPS or left <= BUILD_S_PER_OP * n_ops + CPSAT_OVERSHOOT_S + retime_cost(inst) + 0.1
    if closed or too_big:
        res = CpsatResult(inc, closed, combinatorial_bound(inst))
    else:
        res = solve_model(inst, inc, left, options.workers, deadline=deadline, nominal=0.6 * options.time_limit_s,
                          dtime=0.8 * DTIME_PER_SECOND * options.time_limit_s)
    return finish(problem, "cpsat", inst, res.incumbent, res.proven_optimal, res.bound, t0)

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

import time

from ...bounds.analytic import lower_bound as analytic_lower_bound
from ...bounds.combinatorial import combinatorial_bound
from ...budget import (
    CPSAT_GRID_SHARE,
    CPSAT_GRID_STOP,
    CPSAT_POLISH_STOP,
    CPSAT_SEARCH_SHARE,
    DTIME_PER_SECOND,
    FULL_MODEL_OPS,
    POLISH_SHARE,
    SEARCH_DTIME_SHARE,
    finish_margin,
    records_wall_cuts,
    search_cost,
    setup_cost,
)
from ...core.instance import Instance
from ...core.method import Method, SolveOptions
from ...core.problem import Problem
from ...core.schedule import Schedule
from ...core.tolerance import slack
from ...heuristics.swap_past_w import polished
from ...heuristics.warm_start import first_schedule, grid_starts, hint_start
from ...timing.finalize import infeasible, no_schedule
from ...timing.retime import Incumbent
from .overlap_run import paired_refusal, solve_paired
from .run import CpsatResult, finish, solve_model


def warm_start(inst: Instance, hint: Schedule | None, seconds: float | None = None,
               deadline: float | None = None) -> Incumbent | None:
    """The better of the zero-bubble grid's best order (grid sized for the nominal ``seconds``;
    ``deadline`` is the wall safety net) and a caller's hint."""
    cands = [inc for _, inc in grid_starts(inst, seconds, deadline, keep=1)]
    if (h := hint_start(inst, hint)) is not None:
        cands.append(h)
    return min(cands, key=lambda c: c.objective) if cands else None



def _no_pairs(problem: Problem) -> str | None:
    """With F&B pairs allowed the paired model (:mod:`.overlap`) runs, up to its size limit."""
    if problem.costs.overlap_fb is not None:
        return paired_refusal(problem)
    return None


@records_wall_cuts
def solve_cpsat(problem: Problem, options: SolveOptions) -> Schedule:
    t0 = time.perf_counter()
    inst = Instance.from_problem(problem)
    if inst.overlap is not None:  # F&B pairs: the paired model
        return solve_paired(problem, options)
    if (answer := infeasible(problem, "cpsat", inst, t0)) is not None:
        return answer
    if setup_cost(inst) > options.time_limit_s and (
            first := first_schedule(problem, inst, "cpsat", options.time_limit_s, t0)) is not None:
        return first
    inc = warm_start(inst, options.hint, CPSAT_GRID_SHARE * options.time_limit_s,
                      t0 + CPSAT_GRID_STOP * options.time_limit_s)
    if inc is None:
        return no_schedule(problem, "cpsat", "timeout", "no warm start found a valid order",
                           lower_bound=analytic_lower_bound(inst), solve_time_s=time.perf_counter() - t0)
    inc = polished(inst, inc, POLISH_SHARE * options.time_limit_s, t0 + CPSAT_POLISH_STOP * options.time_limit_s)
    deadline = t0 + options.time_limit_s - finish_margin(inst)
    left = deadline - time.perf_counter()
    closed = inc.objective - combinatorial_bound(inst) <= slack(inc.objective)
    n_ops = inst.num_ops
    too_big = n_ops > FULL_MODEL_OPS or left <= search_cost(inst)
    if closed or too_big:
        res = CpsatResult(inc, closed, combinatorial_bound(inst))
    else:
        res = solve_model(inst, inc, left, options.workers, deadline=deadline, nominal=CPSAT_SEARCH_SHARE * options.time_limit_s,
                          dtime=SEARCH_DTIME_SHARE * DTIME_PER_SECOND * options.time_limit_s)
    return finish(problem, "cpsat", inst, res.incumbent, res.proven_optimal, res.bound, t0)


CPSAT = Method("cpsat", "OR-Tools CP-SAT, exact: proves optimality when it can. Any placement and memory limit "
                        "(costs.overlap_fb: F&B pairs, small problems).",
               "exact", solve_cpsat, requires=_no_pairs, warm_start=True)

"""Method ``cpsat``: the exact CP-SAT model of :mod:`.formulation`, warm-started and deterministic.

Steps (:data:`CPSAT_PHASES`, the measured recipe for making CP-SAT scale on this problem):
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
    POLISH_SHARE,
    Budget,
    finish_margin,
    records_wall_cuts,
    setup_cost,
)
from ...core.instance import Instance
from ...core.method import Method, SolveOptions
from ...core.problem import Problem
from ...core.schedule import Schedule
from ...heuristics.search import Phase, RetimePhase, Search, run_phases
from ...heuristics.swap_past_w import PolishPhase
from ...heuristics.warm_start import GridPhase, HintPhase, first_schedule
from ...timing.finalize import infeasible, no_schedule
from .overlap_run import paired_refusal, solve_paired
from .phases import FullSearchPhase
from .run import finish

#: The warm start (the grid's best order or the hint, the better), its local search, the search; a
#: shorter list of ``auto``'s phases with shares of their own.
CPSAT_PHASES: tuple[Phase, ...] = (
    GridPhase(seconds=lambda inst, limit: CPSAT_GRID_SHARE * limit, charge=lambda inst, limit: 0.0, keep=1),
    HintPhase(), RetimePhase(0.0), PolishPhase(POLISH_SHARE, CPSAT_POLISH_STOP),
    FullSearchPhase(share=CPSAT_SEARCH_SHARE, known_bound=False),
)


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
    limit = options.time_limit_s
    if setup_cost(inst) > limit and (first := first_schedule(problem, inst, "cpsat", limit, t0)) is not None:
        return first
    s = Search(problem, inst, options, Budget(limit, t0 + limit - finish_margin(inst)), combinatorial_bound(inst),
               t0=t0, stop=t0 + CPSAT_GRID_STOP * limit)
    run_phases(CPSAT_PHASES, s)
    if s.incumbent is None:
        return no_schedule(problem, "cpsat", "timeout", "no warm start found a valid order",
                           lower_bound=analytic_lower_bound(inst), solve_time_s=time.perf_counter() - t0)
    return finish(problem, "cpsat", inst, s.incumbent, s.proven, s.bound, t0)


CPSAT = Method("cpsat", "OR-Tools CP-SAT, exact: proves optimality when it can. Any placement and memory limit "
                        "(costs.overlap_fb: F&B pairs, small problems).",
               "exact", solve_cpsat, requires=_no_pairs, warm_start=True)

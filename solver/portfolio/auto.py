"""Method ``auto``: the portfolio a user should call, as an ordered list of phases under one budget.

1. the heuristics (:mod:`.candidates`): the zero-bubble grid, every recipe that applies, the interleaved
   and V memory orders, the hint; ``auto`` is never worse than a method it contains;
2. the best orders re-timed optimally for their order (:class:`~pipesched.solver.heuristics.search.RetimePhase`),
   then, while the gap to the bound is open, a local search that lets Fs and Bs jump ahead of Ws that
   delay them (:class:`~pipesched.solver.heuristics.swap_past_w.PolishPhase`);
3. problems of at most ``ILP_FIRST_OPS`` ops go to the ILP first (:mod:`.small`: it proves the capped
   stage-span cases CP-SAT cannot);
4. a share of the budget proves a stronger bound on single-device relaxations when the gap is still open
   and the problem is not small (:class:`~pipesched.solver.exact.cpsat.phases.RelaxationPhase`);
5. CP-SAT on the full model from the incumbent with the rest (small problems without a memory cumulative:
   one sequential worker first);
6. while the gap is open, CP-SAT on windows of the incumbent until the counted budget reaches the whole
   limit (:mod:`.lns`, which says how a limit is used: steps 1-5 are budgeted as at
   ``min(limit, CANONICAL_LIMIT_S)``, so a larger limit never returns a worse answer);
7. above that canonical limit, on interleaved capped problems, the order search of step 1 again with
   the whole limit's count of trials, before the windows and beside them (:mod:`.order_search`);
8. above ``FULL_MODEL_OPS`` ops (no windows, no CP-SAT model), the critical-chain order search and re-chosen
   tails from the incumbent until the counted budget reaches the limit (:mod:`.chain_fill`).
Status is ``optimal`` only when a bound proves it. Every phase is sized from the *nominal* budget
``options.time_limit_s`` (:class:`~pipesched.solver.budget.Budget`) with measured per-op costs, never from
the clock, so the same problem gives the same schedule unless the wall-clock net cut a phase short (a
machine much slower than the calibration; the answer then says so, and ``benchmarks/determinism.py``
measures it). The one exception is step 3: the ILP stops on the wall clock (neither CBC nor HiGHS has a
deterministic one), so a small problem whose proof needs nearly all of its share may end differently on
a much slower machine. The first valid heuristic order is always kept, so a tiny limit still returns a
schedule.
"""

from __future__ import annotations

import time

from ..bounds.analytic import lower_bound as analytic_lower_bound
from ..bounds.combinatorial import combinatorial_bound
from ..budget import (
    FULL_MODEL_OPS,
    POLISH_SHARE,
    RETIME_SHARE,
    Budget,
    finish_margin,
    heuristic_share,
    records_wall_cuts,
    setup_cost,
    slowdown,
)
from ..budget.limit import CANONICAL_LIMIT_S, idle_seconds
from ..core.instance import Instance
from ..core.method import Method, SolveOptions
from ..core.problem import Problem
from ..core.schedule import Schedule
from ..exact.cpsat.phases import FullSearchPhase, RelaxationPhase, SequentialSearchPhase
from ..exact.cpsat.run import cut_note, finish
from ..heuristics.search import Phase, RetimePhase, Search, run_phases
from ..heuristics.swap_past_w import PolishPhase
from ..heuristics.warm_start import first_schedule
from ..timing.finalize import infeasible, no_schedule
from .candidates import HeuristicsPhase
from .chain_fill import ChainFillPhase
from .lns import WindowsPhase
from .order_search import BestFoundPhase, LongerOrderSearchPhase
from .paired import best_paired
from .small import IlpFirstPhase

#: After the heuristics, which must find an order (:func:`solve_auto` stops otherwise).
AFTER_HEURISTICS: tuple[Phase, ...] = (
    RetimePhase(RETIME_SHARE), PolishPhase(POLISH_SHARE), IlpFirstPhase(), RelaxationPhase(),
    SequentialSearchPhase(), FullSearchPhase(),
)
#: With the whole limit, from the answer of the phases before (budgeted at :func:`canonical_limit`): the
#: interleaved order search with the whole limit's trials (a candidate, not the windows' start), the
#: windows, then the better of the two; above ``FULL_MODEL_OPS`` ops, where the windows do not apply, the
#: critical-chain order searches fill the limit instead (:mod:`.chain_fill`).
FINAL: tuple[Phase, ...] = (LongerOrderSearchPhase(), WindowsPhase(), BestFoundPhase(), ChainFillPhase())


@records_wall_cuts
def solve_auto(problem: Problem, options: SolveOptions) -> Schedule:
    t0 = time.perf_counter()
    inst = Instance.from_problem(problem)
    if (answer := infeasible(problem, "auto", inst, t0)) is not None:
        return answer
    if inst.overlap is not None:  # F&B pairs: the exact models do not apply (.paired)
        return best_paired(problem, options, t0, solve_auto)
    limit = options.time_limit_s
    if setup_cost(inst) > limit and (first := first_schedule(problem, inst, "auto", limit, t0)) is not None:
        return first  # the limit is below what any answer costs: the first schedule, at once (docs/limits.md)
    tb, cb = time.perf_counter(), time.process_time()
    bound = combinatorial_bound(inst)
    took = time.perf_counter() - tb  # finalize computes it again, as slowly as the machine now runs:
    deadline = t0 + limit - took - finish_margin(inst, slowdown(took, time.process_time() - cb))  # wall nets only
    core = canonical_limit(inst, limit)
    s = Search(problem, inst, options, Budget(core, deadline), bound, t0=t0,
               stop=min(t0 + heuristic_share(inst) * core, deadline))  # no grid order past the deadline
    HeuristicsPhase().run(s)
    if not s.found:
        return no_schedule(problem, "auto", "timeout", "no heuristic found an order within memory.limit",
                           lower_bound=analytic_lower_bound(inst), solve_time_s=time.perf_counter() - t0)
    run_phases(AFTER_HEURISTICS, s)
    s.budget = Budget(limit, deadline, spent=idle_seconds(s.budget))  # the windows fill the whole limit
    run_phases(FINAL, s)
    assert s.incumbent is not None
    notes = [*s.notes, *filter(None, [cut_note()])]
    return finish(problem, "auto", inst, s.incumbent, s.proven, s.bound, t0, note="; ".join(notes) or None)


def canonical_limit(inst: Instance, limit: float) -> float:
    """The limit the phases before the windows are budgeted at: ``min(limit, CANONICAL_LIMIT_S)`` where
    the windows apply, so every larger limit starts them from the same answer (:mod:`.lns`); above
    ``FULL_MODEL_OPS`` ops, where no CP-SAT model runs, the limit itself (the grid grows with it)."""
    return limit if inst.num_ops > FULL_MODEL_OPS else min(limit, CANONICAL_LIMIT_S)


AUTO = Method("auto", "Portfolio: every heuristic, the best as CP-SAT's hint, stronger bounds; best valid schedule "
                      "within --time-limit (recommended).", "portfolio", solve_auto, warm_start=True)

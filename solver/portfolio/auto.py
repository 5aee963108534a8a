"""Method ``auto``: the portfolio a user should call.

1. fast heuristics (:mod:`.candidates`): the zero-bubble heuristic grid
   (:mod:`pipesched.solver.heuristics.zero_bubble`), then every registered heuristic that applies and
   fits the memory limit (every fixed recipe and the greedy list scheduler: all of them whenever their
   estimated cost fits the heuristic share, so ``auto`` is never worse than a method it contains), and
   ``options.hint``;
2. the best of them, re-timed optimally for its order (:func:`pipesched.solver.timing.retime.retime`), is the
   incumbent; if it meets the analytic bound we are done;
   then a local search lets Fs and Bs jump ahead of Ws that delay them (:mod:`pipesched.solver.heuristics.swap_past_w`);
3. problems of at most ``ILP_FIRST_OPS`` ops go to the ILP first (:mod:`.small`: it proves the
   capped stage-span cases CP-SAT cannot), then CP-SAT from its answer with what is left;
4. a share of the budget proves a stronger bound on single-device relaxations
   (:mod:`pipesched.solver.exact.cpsat.relaxations`) when the gap is still open and the problem is not small;
5. CP-SAT on the full model from the incumbent (:func:`pipesched.solver.exact.cpsat.run.solve_model`) with the rest, up to
   ``FULL_MODEL_OPS`` ops (small problems without a memory cumulative: one sequential worker first,
   ``SINGLE_MAX_S`` at most).
Status is ``optimal`` only when a bound proves it. Every step is deterministic (deterministic
time limits calibrated per kind of model, fixed seeds, fixed candidate order), so the same problem
gives the same schedule unless the wall-clock net cut a step short (a machine much slower than the
calibration; ``benchmarks/determinism.py`` measures it). The one exception is step 3: the ILP
stops on the wall clock (neither CBC nor HiGHS has a deterministic one), so a small problem whose
proof needs nearly all of its share may end differently on a much slower machine.

Time limit: every optional phase is sized from the *nominal* budget ``options.time_limit_s`` (so
the result does not depend on the clock) using measured per-op costs, and skipped when its
estimated cost does not fit; the wall clock is only checked as a safety net on an overloaded
machine. The first valid heuristic order is always kept, so a tiny limit still returns a schedule.
"""

from __future__ import annotations

import time

from ..bounds.analytic import lower_bound as analytic_lower_bound
from ..bounds.combinatorial import combinatorial_bound
from ..budget import (
    BOUND_SHARE,
    CPSAT_OVERSHOOT_S,
    DTIME_PER_SECOND,
    FULL_MODEL_OPS,
    ILP_FIRST_MIN_S,
    ILP_FIRST_OPS,
    ILP_FIRST_SHARE,
    POLISH_SHARE,
    RELAX_MIN_S,
    RELAX_S_PER_OP,
    RETIME_SHARE,
    RETIMED_ORDERS,
    SEARCH_DTIME_SHARE,
    SINGLE_MAX_S,
    SMALL_OPS,
    finish_margin,
    heuristic_share,
    note_wall_cut,
    records_wall_cuts,
    retime_cost,
    search_cost,
    setup_cost,
    slowdown,
)
from ..core.instance import Instance
from ..core.method import Method, SolveOptions
from ..core.problem import Problem
from ..core.schedule import Schedule
from ..core.tolerance import slack
from ..exact.cpsat.formulation import needs_memory_resource
from ..exact.cpsat.relaxations import relaxation_bound
from ..exact.cpsat.run import CpsatResult, finish, solve_model
from ..exact.cpsat.scaling import Scaling
from ..heuristics.swap_past_w import polished
from ..heuristics.warm_start import first_schedule
from ..timing.finalize import infeasible, no_schedule
from ..timing.retime import Incumbent, retime
from ..timing.simulate import DeadlockError
from .candidates import heuristic_incumbents
from .paired import best_paired
from .small import ilp_first


def _close(a: float, b: float) -> bool:
    return a - b <= slack(a)


def best_incumbent(inst: Instance, cands: list[tuple[str, Incumbent]], seconds: float = float("inf"),
                   deadline: float = float("inf")) -> Incumbent:
    """The best candidate after optimal re-timing of the few best orders (as many as the estimated
    re-timing cost fits in the nominal ``seconds``; ``deadline`` is the wall safety net)."""
    cands = sorted(cands, key=lambda nc: nc[1].objective)[:RETIMED_ORDERS]
    cost = retime_cost(inst)
    timed = []
    for k, (_, inc) in enumerate(cands):
        if (k + 1) * cost > seconds:
            break
        if time.perf_counter() + cost > deadline:
            note_wall_cut("optimal re-timing")
            break
        try:
            timed.append(retime(inst, inc.order))
        except DeadlockError:
            timed.append(inc)
    return min(timed + [c for _, c in cands], key=lambda c: c.objective)


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
    stop = min(t0 + heuristic_share(inst) * limit, deadline)  # wall net: no grid order past the deadline
    found = heuristic_incumbents(problem, inst, options, stop=stop, bound=bound, deadline=deadline)
    cands = found.found
    if not cands:
        return no_schedule(problem, "auto", "timeout", "no heuristic found an order within memory.limit",
                           lower_bound=analytic_lower_bound(inst), solve_time_s=time.perf_counter() - t0)
    inc = best_incumbent(inst, cands, seconds=RETIME_SHARE * limit, deadline=deadline)
    if not _close(inc.objective, bound):
        inc = polished(inst, inc, POLISH_SHARE * limit, deadline)
    res = CpsatResult(inc, _close(inc.objective, bound), bound)

    def left() -> float:
        return deadline - time.perf_counter()

    nominal = limit * DTIME_PER_SECOND  # deterministic budgets derive from this, not the clock
    n_ops = inst.num_ops
    rest = max(0.0, limit - found.spent)  # nominal seconds left for the bound and the search
    small = n_ops <= SMALL_OPS  # the full model proves as much
    search_dtime = nominal * SEARCH_DTIME_SHARE
    share = ILP_FIRST_SHARE * rest
    if not res.proven_optimal and n_ops <= ILP_FIRST_OPS and share >= ILP_FIRST_MIN_S:  # proves what CP-SAT cannot
        inc, proven, ilp_bound = ilp_first(problem, inst, inc, min(share, left()))
        bound = max(bound, min(ilp_bound or 0.0, inc.objective))
        res = CpsatResult(inc, proven or _close(inc.objective, bound), bound)
        rest -= share
        search_dtime *= 1 - ILP_FIRST_SHARE
    relax = RELAX_S_PER_OP * n_ops + 2 * CPSAT_OVERSHOOT_S  # two devices
    relaxed = (not res.proven_optimal and not small and max(relax, RELAX_MIN_S) <= BOUND_SHARE * rest
               and left() > relax)
    if relaxed:
        share = left() * BOUND_SHARE - 2 * CPSAT_OVERSHOOT_S  # wall net, after the overshoot
        bound = max(bound, relaxation_bound(inst, share, upper=inc.objective,
                                            hint=inc.start, workers=options.workers, dtime=nominal * BOUND_SHARE))
        res = CpsatResult(inc, _close(inc.objective, bound), bound)
    planned = rest * (1 - BOUND_SHARE) if relaxed else rest  # nominal seconds for the searches below
    search = search_cost(inst)  # least worth starting
    sequential = small and not needs_memory_resource(inst, Scaling.of(inst))
    if not res.proven_optimal and sequential and search <= rest and left() > search:
        single = min(rest, SINGLE_MAX_S)
        planned -= single
        res = solve_model(inst, inc, single, 1, known_bound=bound, deadline=deadline, nominal=single,
                          dtime=DTIME_PER_SECOND * single)
        inc, bound = res.incumbent, max(bound, res.bound or 0.0)
    if not res.proven_optimal and n_ops <= FULL_MODEL_OPS and search <= planned and left() > search:
        res = solve_model(inst, inc, left(), options.workers, known_bound=bound, deadline=deadline, nominal=planned,
                          dtime=search_dtime * (1 - BOUND_SHARE if relaxed else 1.0))
        bound = max(bound, res.bound or 0.0)
    return finish(problem, "auto", inst, res.incumbent, res.proven_optimal, bound, t0)


AUTO = Method("auto", "Portfolio: every heuristic, the best as CP-SAT's hint, stronger bounds; best valid schedule "
                      "within --time-limit (recommended).", "portfolio", solve_auto, warm_start=True)

"""``auto`` on problems with ``costs.overlap_fb`` (overlapped F&B pairs, docs/dualpipe.md).

Why apart from the main portfolio: the main models run one op at a time per device, so with pairs
allowed their proofs would not hold. The portfolio here is the best of the schedules of the methods
that apply (the ``dualpipe`` recipe with its pairs, greedy without) and of the main portfolio run on
the same problem without ``overlap_fb`` (an unpaired schedule is valid with or without the option),
so it is never worse than the recipe nor than ``auto`` without overlap. Where the paired CP-SAT model
takes the problem (:mod:`pipesched.solver.exact.cpsat.overlap`, up to ``PAIRED_MAX_OPS``), the main
portfolio gets ``PAIRED_PLAIN_SHARE`` of the limit and the paired search the rest, from the best
schedule so far: its proofs hold with pairs. Otherwise the bound is the pair-free relaxation's
(:meth:`pipesched.solver.core.instance.Instance.without_overlap`), so ``optimal`` only where that meets it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..budget import PAIRED_PLAIN_SHARE
from ..core.method import SolveOptions
from ..core.problem import Problem
from ..core.schedule import Schedule
from ..core.tolerance import slack
from ..exact.cpsat.overlap_run import paired_refusal, solve_paired
from ..heuristics.catalog import heuristic_schedules
from ..timing.finalize import from_order, no_schedule


def best_paired(problem: Problem, options: SolveOptions, t0: float,
                plain: Callable[[Problem, SolveOptions], Schedule] | None = None) -> Schedule:
    """The best schedule (objective, then makespan) of every applicable non-exact method and of ``plain``
    (the main portfolio) on the problem without ``overlap_fb``, re-timed for this one; relabelled ``auto``."""
    best: Schedule | None = None

    def keep(schedule: Schedule) -> None:
        nonlocal best
        if schedule.ops and (best is None or (schedule.objective_value, schedule.makespan)
                             < (best.objective_value, best.makespan)):
            best = schedule

    for _, schedule in heuristic_schedules(problem, options):
        keep(schedule)
    paired = paired_refusal(problem) is None
    left = options.time_limit_s - (time.perf_counter() - t0)
    if plain is not None and left > 0:  # below its set-up cost the portfolio returns its first schedule at once
        share = min(left, PAIRED_PLAIN_SHARE * options.time_limit_s) if paired else left
        without = problem.model_copy(update={"costs": problem.costs.model_copy(update={"overlap_fb": None})})
        answer = plain(without, SolveOptions(time_limit_s=share, workers=options.workers))
        if answer.ops:
            keep(from_order(problem, "auto", answer.order()))
    left = options.time_limit_s - (time.perf_counter() - t0)
    if paired and left > 0:  # warm-started from the best so far: never worse, and its proof holds with pairs
        answer = solve_paired(problem, SolveOptions(time_limit_s=left, workers=options.workers, hint=best))
        if answer.ops and (best is None or answer.objective_value <= best.objective_value + slack(best.objective_value)):
            best = answer
    elapsed = round(time.perf_counter() - t0, 6)
    if best is None:
        return no_schedule(problem, "auto", "timeout", "no method found a schedule within memory.limit",
                           solve_time_s=elapsed)
    return best.model_copy(update={"method": "auto", "solve_time_s": elapsed})

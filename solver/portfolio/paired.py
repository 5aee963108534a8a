"""``auto`` on problems with ``costs.overlap_fb`` (overlapped F&B pairs, docs/dualpipe.md).

Why apart from the main portfolio: CP-SAT and the ILP run one op at a time per device, so with pairs
allowed their proofs would not hold and they refuse such problems; the portfolio then is the best
schedule of the methods that apply (the ``dualpipe`` recipe with its pairs, greedy without), which is
never worse than the recipe. Its bound is the pair-free relaxation's
(:meth:`pipesched.solver.core.instance.Instance.without_overlap`), so ``optimal`` only where that meets it.
"""

from __future__ import annotations

import time

from ..core.problem import Problem
from ..core.registry import SolveOptions, methods
from ..core.schedule import Schedule
from ..heuristics.warm_start import EXACT_METHODS, SKIPPED
from ..timing.finalize import no_schedule


def best_paired(problem: Problem, options: SolveOptions, t0: float) -> Schedule:
    """The best schedule (objective, then makespan) of every applicable non-exact method, relabelled ``auto``."""
    best: Schedule | None = None
    for m in sorted(methods(), key=lambda m: m.name):
        if m.name in EXACT_METHODS or m.applies(problem):
            continue
        try:
            schedule = m.run(problem, SolveOptions(time_limit_s=options.time_limit_s, workers=1))
        except SKIPPED:
            continue
        if schedule.ops and (best is None or (schedule.objective_value, schedule.makespan)
                             < (best.objective_value, best.makespan)):
            best = schedule
    elapsed = round(time.perf_counter() - t0, 6)
    if best is None:
        return no_schedule(problem, "auto", "timeout", "no method found a schedule within memory.limit",
                           solve_time_s=elapsed)
    return best.model_copy(update={"method": "auto", "solve_time_s": elapsed})

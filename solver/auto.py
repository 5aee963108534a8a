"""Method ``auto``: the portfolio a user should call.

1. fast heuristics: every classic recipe that applies and fits the memory limit, the greedy list
   scheduler, the zero-bubble heuristic grid (:mod:`.zb_heuristic`) and ``options.hint``;
2. the best of them, re-timed optimally for its order (:func:`cpsat.retime`), is the
   incumbent; if it meets the analytic bound we are done;
3. a share of the budget proves a stronger bound on single-device relaxations
   (:mod:`.strong_bounds`) when the gap is still open and the problem is not small;
4. CP-SAT on the full model from the incumbent (:func:`cpsat.solve_model`) with the rest, up to
   ``FULL_MODEL_OPS`` ops.
Status is ``optimal`` only when a bound proves it. Every step is deterministic (deterministic
time limits, fixed seeds, fixed candidate order), so the same problem gives the same schedule.
"""

from __future__ import annotations

import contextlib
import time

from .bounds import lower_bound as analytic_lower_bound
from .build import no_schedule
from .cpsat import (
    DTIME_PER_SECOND,
    CpsatResult,
    Incumbent,
    finish,
    finish_margin,
    retime,
    solve_model,
)
from .errors import InvalidScheduleError, NotApplicableError
from .feasibility import infeasibility_reason
from .instance import Instance
from .problem import Problem
from .registry import SolveOptions, method, methods
from .schedule import Schedule
from .simulate import DeadlockError
from .strong_bounds import combinatorial_bound, relaxation_bound
from .zb_heuristic import zb_candidates

#: Methods the portfolio never calls as heuristics (itself and the exact solvers).
_EXACT = ("auto", "cpsat", "ilp")
#: Share of the remaining budget spent on the relaxation bound when the gap is open.
BOUND_SHARE = 0.25
#: Problems up to this many ops skip the relaxations: CP-SAT on the full model closes them directly.
SMALL_OPS = 1000
#: Above this many ops the full model is skipped: CP-SAT's propagation on it is so slow that a single
#: search task overruns any time limit (measured: 27 s for one task at 12k ops) without improving.
FULL_MODEL_OPS = 4000
#: After this share of the budget the portfolio stops trying further recipes.
HEURISTIC_SHARE = 0.4


def _close(a: float, b: float) -> bool:
    return a - b <= 1e-9 * max(1.0, abs(a))


def heuristic_incumbents(problem: Problem, inst: Instance, options: SolveOptions,
                         stop: float = float("inf"), bound: float = 0.0) -> list[tuple[str, Incumbent]]:
    """Every heuristic's order that respects the memory limit, in a fixed order (the recipes are
    skipped when the zero-bubble grid already meets ``bound``, or once ``stop`` has passed and
    something was found: a safety net on a loaded machine)."""
    out: list[tuple[str, Incumbent]] = []
    for k, c in enumerate(zb_candidates(inst)):
        out.append((f"zb-auto[{k}]", Incumbent(c.order, c.start, c.objective)))
    if out and _close(min(c.objective for _, c in out), bound):
        return out
    for m in sorted(methods(), key=lambda m: m.name):
        if m.name in _EXACT or m.applies(problem) or (out and time.perf_counter() > stop):
            continue
        try:
            sched = m.run(problem, SolveOptions(time_limit_s=options.time_limit_s, workers=1))
        except (NotApplicableError, InvalidScheduleError, DeadlockError, ValueError):
            continue
        if sched.ops:
            out.append((m.name, Incumbent.of(inst, sched.order())))
    if options.hint is not None and options.hint.ops:
        with contextlib.suppress(DeadlockError, KeyError, ValueError):
            out.append(("hint", Incumbent.of(inst, options.hint.order())))
    return out


def best_incumbent(inst: Instance, cands: list[tuple[str, Incumbent]]) -> Incumbent:
    """The best candidate after optimal re-timing of the few best orders."""
    cands = sorted(cands, key=lambda nc: nc[1].objective)[:2]
    timed = []
    for _, inc in cands:
        try:
            timed.append(retime(inst, inc.order))
        except DeadlockError:
            timed.append(inc)
    return min(timed + [c for _, c in cands], key=lambda c: c.objective)


@method("auto", "Portfolio: every heuristic, the best as CP-SAT's hint, stronger bounds; best valid schedule "
                "within --time-limit (recommended).")
def solve_auto(problem: Problem, options: SolveOptions) -> Schedule:
    t0 = time.perf_counter()
    inst = Instance.from_problem(problem)
    reason = infeasibility_reason(inst)
    if reason:
        return no_schedule(problem, "auto", "infeasible", reason, solve_time_s=time.perf_counter() - t0)
    deadline = t0 + options.time_limit_s - finish_margin(inst)
    cands = heuristic_incumbents(problem, inst, options, stop=t0 + HEURISTIC_SHARE * options.time_limit_s,
                                 bound=combinatorial_bound(inst))
    if not cands:
        return no_schedule(problem, "auto", "timeout", "no heuristic found an order within memory.limit",
                           lower_bound=analytic_lower_bound(inst), solve_time_s=time.perf_counter() - t0)
    inc = best_incumbent(inst, cands)
    bound = combinatorial_bound(inst)
    res = CpsatResult(inc, _close(inc.objective, bound), bound)

    def left() -> float:
        return deadline - time.perf_counter()

    nominal = options.time_limit_s * DTIME_PER_SECOND  # deterministic budgets derive from this, not the clock
    n_ops = len(inst.kinds) * inst.num_stages * inst.microbatches
    small = n_ops <= SMALL_OPS  # the full model proves as much
    if not res.proven_optimal and not small and left() > 0.2:
        bound = max(bound, relaxation_bound(inst, left() * BOUND_SHARE, upper=inc.objective, hint=inc.start,
                                            workers=options.workers, dtime=nominal * BOUND_SHARE))
        res = CpsatResult(inc, _close(inc.objective, bound), bound)
    if not res.proven_optimal and left() > 0.1 and n_ops <= FULL_MODEL_OPS:
        res = solve_model(inst, inc, left(), options.workers, known_bound=bound, deadline=deadline,
                          dtime=nominal * (0.8 if small else (1 - BOUND_SHARE) * 0.8))
        bound = max(bound, res.bound or 0.0)
    return finish(problem, "auto", inst, res.incumbent, res.proven_optimal, bound, t0)

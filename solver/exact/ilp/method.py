"""``ilp``: the disjunctive MILP (:mod:`.formulation`) solved by CBC or HiGHS (:mod:`.backends`).

Horizon ``H`` (the big-M scale): a heuristic schedule's makespan bounds the optimal makespan. For
stage span every F and B of microbatch i lies between F(0, i) and B(0, i), both on stage 0's
device, so each device starts inside that device's window and ends within one span after it:
some optimal schedule (shifted to start at 0) ends by ``2 Z* <= 2 Z_heuristic``. Without any
heuristic schedule, ``H`` = all work plus comm on every cross-device edge (no semi-active
schedule is longer).

The schedule is never read from the solver's times (they carry its tolerances): the per-device
order is read from the binaries, and :func:`pipesched.solver.timing.retime.best_times` times it
exactly. Status ``optimal`` only when the solver proved optimality (PuLP reports a CBC run cut
by the time limit as "Optimal"; its ``sol_status`` and CBC's log tell the truth).
"""

from __future__ import annotations

import math
import time

from ...bounds.analytic import lower_bound as analytic_lower_bound
from ...budget import (
    BUILD_SECONDS_PER_PAIR,
    CBC_START_S,
    HIGHS_START_S,
    ILP_BUILD_SHARE,
    ILP_SOLVE_SHARE,
    MAX_PAIRS,
)
from ...core.errors import InvalidScheduleError, NotApplicableError
from ...core.instance import Instance, OpId
from ...core.method import ALL_FEATURES, Method, SolveOptions
from ...core.metrics import makespan, objective_value, peak_memory
from ...core.problem import Problem
from ...core.schedule import Order, Schedule
from ...core.tolerance import slack, within_cap
from ...heuristics.warm_start import hint_start, recipe_orders
from ...timing.finalize import finalize, infeasible, no_schedule
from ...timing.retime import best_times
from ...timing.simulate import DeadlockError
from .backends import RunResult, highs_available, run_cbc, run_highs
from .formulation import IlpModel, build_model, canonical_times, order_from_solution, set_warm_start

METHOD = "ilp"
BACKENDS = ("cbc", "highs")
#: Relative tolerance for "the solver's objective and the re-timed order agree".
AGREE = 1e-6


def fits_memory(inst: Instance, order: Order) -> bool:
    """True when ``order`` keeps every device within ``memory.limit`` (with float slack)."""
    return all(
        within_cap(peak, cap) for peak, cap in zip(peak_memory(inst, order), inst.limit, strict=True)
    )


def warm_start(problem: Problem, inst: Instance, options: SolveOptions) -> dict[OpId, float] | None:
    """Best start times among the hint and every heuristic method that applies (None when none fits),
    each order timed optimally (:func:`best_times`); the candidates come from
    :mod:`pipesched.solver.heuristics.warm_start`, in a fixed order, so the answer is deterministic."""
    orders: list[Order] = []
    if (h := hint_start(inst, options.hint)) is not None:
        orders.append(h.order)
    orders += [order for _, order in recipe_orders(problem, options)]
    best: dict[OpId, float] | None = None
    for order in orders:
        if not fits_memory(inst, order):
            continue
        try:
            times = best_times(inst, order)
        except DeadlockError:
            continue
        if best is None or objective_value(inst, times) < objective_value(inst, best):
            best = times
    return canonical_times(inst, best) if best is not None else None


def fallback_horizon(inst: Instance) -> float:
    """A makespan no semi-active schedule exceeds: all work plus comm on every cross-device edge."""
    crossings = sum(lag > 0 for op in inst.ops() for _, lag in inst.predecessors(op))
    return inst.total_work() + crossings * inst.comm


def _check_options(options: SolveOptions) -> str:
    backend = options.backend or "cbc"
    if backend not in BACKENDS:
        raise NotApplicableError(
            f"options.backend {options.backend!r} is not an ILP backend; choose one of: {', '.join(BACKENDS)}"
        )
    if backend == "highs" and not highs_available():
        raise NotApplicableError("options.backend 'highs' needs the highspy package: pip install 'pipesched[highs]'")
    return backend


def order_pairs(problem: Problem) -> int:
    """Pairs of ops sharing a device: the order binaries before any is fixed."""
    per_device = problem.num_ops // problem.devices
    return problem.devices * per_device * (per_device - 1) // 2


def _too_large(problem: Problem) -> str | None:
    pairs = order_pairs(problem)
    if pairs > MAX_PAIRS:
        return (
            f"the ILP would need {pairs} order pairs (devices x ops-per-device choose 2), more than "
            f"{MAX_PAIRS}; use cpsat or auto for problems this size"
        )
    return None


def solve_ilp(problem: Problem, options: SolveOptions) -> Schedule:
    t0 = time.perf_counter()
    backend = _check_options(options)
    inst = Instance.from_problem(problem)
    if (answer := infeasible(problem, METHOD, inst, t0)) is not None:
        return answer
    warm = warm_start(problem, inst, options)
    bound = analytic_lower_bound(inst)
    if warm is not None:
        upper = objective_value(inst, warm)
        horizon = upper if inst.objective == "makespan" else 2 * upper
        horizon = max(horizon, makespan(inst, warm))
    else:
        horizon = fallback_horizon(inst)
        upper = horizon
        horizon = horizon if inst.objective == "makespan" else 2 * horizon
    if warm is not None and (
        upper <= bound + slack(bound)  # the analytic bound already proves it optimal
        or order_pairs(problem) * BUILD_SECONDS_PER_PAIR > ILP_BUILD_SHARE * (options.time_limit_s - (time.perf_counter() - t0))
    ):  # nothing to gain, or no time left to build the model and search: the warm start is the answer
        return _answer(problem, inst, None, RunResult("none"), warm, time.perf_counter() - t0)
    eps = slack(horizon)
    model = build_model(inst, horizon + eps, bound - eps, upper + eps)
    start_values = set_warm_start(model, warm) if warm is not None else None
    # leave a little of the budget for reading back, re-timing and validating (and, for HiGHS,
    # for starting its process)
    remaining = ILP_SOLVE_SHARE * (options.time_limit_s - (time.perf_counter() - t0)) - (
        HIGHS_START_S if backend == "highs" else CBC_START_S)
    if backend == "highs":
        result = run_highs(model, remaining, start_values)
    else:
        result = run_cbc(model, remaining, warm is not None)
    return _answer(problem, inst, model, result, warm, time.perf_counter() - t0)



ILP = Method(
    METHOD,
    "ILP (PuLP): disjunctive big-M model, CBC by default or HiGHS (backend 'highs'). Any problem; "
    "proves optima of small cases (p*m up to ~32), warm-started from the heuristics.",
    "exact", solve_ilp, requires=_too_large, warm_start=True,
    supports=ALL_FEATURES - {"costs.overlap_fb"},
    unsupported="the ILP does not pair F and B into one op (docs/dualpipe.md); use cpsat (small problems), "
                "dualpipe, greedy or auto",
)

def _answer(
    problem: Problem, inst: Instance, model: IlpModel | None, result: RunResult, warm: dict[OpId, float] | None,
    elapsed: float,
) -> Schedule:
    """The best valid schedule we hold, with ``optimal`` only when the solver proved it."""
    candidates: list[dict[OpId, float]] = []
    if model is not None and result.values:
        order = order_from_solution(model, lambda name: result.values.get(name, 0.0))
        try:
            if fits_memory(inst, order):
                candidates.append(best_times(inst, order))
        except DeadlockError:
            pass
    if warm is not None:
        candidates.append(warm)
    if not candidates:
        if result.status == "infeasible":
            return no_schedule(
                problem, METHOD, "infeasible",
                "the solver proved that no order fits memory.limit on every device", solve_time_s=elapsed,
            )
        return no_schedule(
            problem, METHOD, "timeout", "no schedule found within the time limit",
            lower_bound=_bound(inst, result), solve_time_s=elapsed,
        )
    times = min(candidates, key=lambda c: objective_value(inst, c))
    proven = (
        result.status == "optimal"
        and result.objective is not None
        and objective_value(inst, times) <= result.objective + AGREE * max(1.0, abs(result.objective))
    )
    status = "optimal" if proven else "feasible"
    try:
        return finalize(
            problem, METHOD, times, status=status, lower_bound=_bound(inst, result), solve_time_s=elapsed, inst=inst
        )
    except InvalidScheduleError:
        if warm is None or times is warm:
            raise
        return finalize(problem, METHOD, warm, lower_bound=_bound(inst, result), solve_time_s=elapsed, inst=inst)


def _bound(inst: Instance, result: RunResult) -> float | None:
    """The solver's best bound, lowered by its tolerance so it never exceeds the optimum."""
    bound = result.objective if result.status == "optimal" else result.bound
    if bound is None or not math.isfinite(bound):
        return None
    return bound - AGREE * max(1.0, abs(bound))

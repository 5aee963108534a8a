"""auto's "optimal" at the paper's 1p cap, checked by brute force at a smaller scale.

``benchmarks/zb_paper.py`` reports its twelve 1p rows as proven optimal. Here the same shape
(paper costs and comm, F +M_B, B M_W - M_B, W -M_W, limit p M_B, stage span) at p = 2 is solved by
``auto`` and by :mod:`bruteforce`, which shares no bound or search with it: whatever status auto
reports, its objective is never below the optimum, and "optimal" means equal to it.

At p = 2..4 (beyond brute force), every Table 6 profile of the paper is solved by ``auto`` and by
the exact ILP built with **no bound cut**: the ILP's objective gets lower bound 0, not the analytic
bound ``ilp`` normally gives it, and no bound of :mod:`pipesched.solver.bounds` or CP-SAT enters the
model (its device-load rows are inequalities of the formulation itself). Its horizon is the
solver-free "all work plus all comm" and its upper cut auto's objective, which a validated schedule
attains. So CBC's proof is independent of the bounds that make auto's rows "optimal".
"""

from __future__ import annotations

import pytest
from bruteforce import optimum

from pipesched.solver import Instance, Problem, SolveOptions, solve
from pipesched.solver.exact.ilp.backends import run_cbc
from pipesched.solver.exact.ilp.formulation import build_model

H, A, SEQUENCE = 2304, 24, 1024  # the paper's 1.5B model
M_B, M_W = 34 * H + 5 * A * SEQUENCE, 32 * H


#: Table 6 of the paper: h, a, F, B, W, comm (ms) per model.
PROFILES = {"1.5B": (2304, 24, 18.522, 18.086, 9.337, 0.601), "6.2B": (4096, 32, 29.718, 29.444, 19.927, 0.527),
            "14.6B": (5120, 40, 11.347, 11.248, 8.132, 0.377), "28.3B": (6144, 48, 10.419, 10.207, 7.715, 0.408)}
#: (p, m) pairs CBC proves in seconds without bound cuts (p = 4, m = 8 took minutes on some profiles).
SMALL = ((2, 8), (3, 6), (4, 6))
#: CBC's stopping rule on these models (``run_cbc`` runs it at a zero gap ratio).
AGREE = 1e-6


def paper_1p(p: int, m: int, model: str = "1.5B") -> Problem:
    h, a, f, b, w, comm = PROFILES[model]
    mb, mw = 34 * h + 5 * a * SEQUENCE, 32 * h
    return Problem(devices=p, microbatches=m, objective="stage_span",
                   costs={"forward": f, "backward_input": b, "backward_weight": w, "comm": comm},
                   memory={"forward": mb, "backward_input": mw - mb, "backward_weight": -mw, "limit": p * mb})


@pytest.mark.parametrize("m", [2, 3, 4, 5, 6])
def test_auto_optimal_at_1p_equals_the_brute_forced_optimum(m: int) -> None:
    problem = paper_1p(2, m)
    best = optimum(problem)
    assert best is not None
    sched = solve(problem, "auto", SolveOptions(time_limit_s=10))
    assert sched.objective_value is not None
    assert sched.objective_value >= best - 1e-9 * best
    if sched.status == "optimal":
        assert sched.objective_value == pytest.approx(best, rel=1e-9)
    assert sched.lower_bound is None or sched.lower_bound <= best + 1e-9 * best


def _ilp_optimum_without_bound_cuts(problem: Problem, upper: float) -> float:
    inst = Instance.from_problem(problem)
    crossings = sum(lag > 0 for op in inst.ops() for _, lag in inst.predecessors(op))
    horizon = inst.total_work() + crossings * inst.comm  # no order's least solution ends later
    model = build_model(inst, horizon * (1 + AGREE), lower=0.0, upper=upper * (1 + AGREE))
    result = run_cbc(model, 150.0, warm=False)
    assert result.status == "optimal" and result.objective is not None, (
        f"CBC did not prove this case ({result.status}); pick a smaller one: {problem.model_dump_json()}")
    return result.objective


@pytest.mark.parametrize("model", sorted(PROFILES))
@pytest.mark.parametrize(("p", "m"), SMALL)
def test_auto_optimal_at_1p_agrees_with_an_ilp_without_bound_cuts(model: str, p: int, m: int) -> None:
    problem = paper_1p(p, m, model)
    sched = solve(problem, "auto", SolveOptions(time_limit_s=10))
    assert sched.objective_value is not None and sched.lower_bound is not None
    best = _ilp_optimum_without_bound_cuts(problem, sched.objective_value)
    assert sched.status == "optimal", "the paper-size rows claim optimal; at this size the claim should hold too"
    assert sched.objective_value == pytest.approx(best, rel=AGREE)
    assert sched.lower_bound <= best * (1 + AGREE)

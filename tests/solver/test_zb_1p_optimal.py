"""auto's "optimal" at the paper's 1p cap, checked by brute force at a smaller scale.

``benchmarks/zb_paper.py`` reports its twelve 1p rows as proven optimal. Here the same shape
(paper costs and comm, F +M_B, B M_W - M_B, W -M_W, limit p M_B, stage span) at p = 2 is solved by
``auto`` and by :mod:`bruteforce`, which shares no bound or search with it: whatever status auto
reports, its objective is never below the optimum, and "optimal" means equal to it.
"""

from __future__ import annotations

import pytest
from bruteforce import optimum

from pipesched.solver import Problem, SolveOptions, solve

H, A, SEQUENCE = 2304, 24, 1024  # the paper's 1.5B model
M_B, M_W = 34 * H + 5 * A * SEQUENCE, 32 * H


def paper_1p(p: int, m: int) -> Problem:
    return Problem(devices=p, microbatches=m, objective="stage_span",
                   costs={"forward": 18.522, "backward_input": 18.086, "backward_weight": 9.337, "comm": 0.601},
                   memory={"forward": M_B, "backward_input": M_W - M_B, "backward_weight": -M_W, "limit": p * M_B})


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

"""A small interleaved problem under a tight cap and a search state started from the interleaved policies'
best order: shared by the tests of the phases that search from an incumbent (the longer order search,
the chain fill), so each checks its phase on the same start."""

from __future__ import annotations

from pipesched.solver.budget import Budget
from pipesched.solver.core.instance import Instance
from pipesched.solver.core.method import SolveOptions
from pipesched.solver.core.problem import Problem
from pipesched.solver.heuristics.interleaved_memory import interleaved_candidates
from pipesched.solver.heuristics.search import Search


def interleaved(m: int = 8, cap: float = 9.0) -> Problem:
    """Loop v = 2, p = 4 under a cap below the interleaved recipes' peak: the order searches apply and
    the policies' best leaves them room."""
    return Problem(devices=4, microbatches=m, stages_per_device=2, objective="stage_span",
                   costs={"forward": 1.0, "backward_input": 1.1, "backward_weight": 0.7, "comm": 0.05},
                   memory={"forward": 1.0, "backward_input": 0.0, "backward_weight": -1.0, "limit": cap})


def search_from_policies(problem: Problem, limit: float) -> Search:
    """A fresh search at ``limit`` whose incumbent is the interleaved policies' best (no search yet)."""
    inst = Instance.from_problem(problem)
    s = Search(problem, inst, SolveOptions(time_limit_s=limit, workers=1), Budget(limit), bound=0.0)
    s.settle(interleaved_candidates(inst, keep=1)[0], proven=False)
    return s

"""The grid yields the searches among the recipes their share (issue 29: ``auto`` 54% behind greedy).

When not every recipe fits auto's heuristics (tiny limits, or problems above ``FULL_MODEL_OPS``), the
grid used to take its whole share before the recipes, and greedy, whose estimate no longer fitted what
was left, was skipped even where it built the best order by far. These tests run the phases under a
counted budget only (no wall-clock net: ``stop`` and the deadline are infinite), so what runs depends
on the estimates and the nominal limit alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from pipesched.solver.budget import MODELLED, Budget
from pipesched.solver.core.instance import Instance
from pipesched.solver.core.method import SolveOptions
from pipesched.solver.core.problem import Problem
from pipesched.solver.heuristics.search import Named, Phase, Search
from pipesched.solver.heuristics.warm_start import GridPhase
from pipesched.solver.heuristics.zb_phase import ZBConstructionsPhase
from pipesched.solver.portfolio.candidates import HEURISTIC_PHASES, RECIPES


@dataclass
class _Offered(Search):
    """A search that remembers every order offered to it: the kept list holds only the best few."""

    offered: list[str] = field(default_factory=list)

    def keep(self, found: Sequence[Named]) -> None:
        self.offered.extend(name for name, _ in found)
        super().keep(found)


def _problem() -> Problem:
    """192 ops, the zero-bubble paper's 14.6B costs, a cap of 1.5p: greedy and four fixed recipes apply."""
    return Problem(devices=4, microbatches=16, objective="stage_span",
                   costs={"forward": 11.3, "backward_input": 11.2, "backward_weight": 8.1, "comm": 0.38},
                   memory={"forward": 1.0, "backward_input": 0.0, "backward_weight": -1.0, "limit": 6.0})


def _search(problem: Problem, limit: float) -> _Offered:
    inst = Instance.from_problem(problem)
    return _Offered(problem, inst, SolveOptions(time_limit_s=limit, workers=1), Budget(limit), bound=0.0)


def _run(phases: Sequence[Phase], problem: Problem, limit: float) -> _Offered:
    s = _search(problem, limit)
    for phase in phases:
        if phase.applies(s):
            phase.run(s)
    return s


def _the_limit_where_only_yielding_helps(problem: Problem) -> float:
    """A limit where the recipes do not all fit, greedy fits the heuristic share once the grid yields,
    and does not fit it after the grid's whole share: derived from the estimates, not written down."""
    s = _search(problem, 1.0)
    costs = RECIPES.costed(s)
    searches = sum(c for c, m in costs if m.role != "recipe")
    before = ZBConstructionsPhase().estimate(s) if ZBConstructionsPhase().applies(s) else 0.0
    share, grid = MODELLED.heuristic_share, MODELLED.grid_share
    low, high = (before + searches) / share, (before + searches) / (share - grid)
    high = min(high, sum(c for c, _ in costs) / share)  # below this, not every recipe fits
    assert low < high, (low, high)
    return (low + high) / 2


def test_the_grid_leaves_greedy_its_share() -> None:
    problem = _problem()
    limit = _the_limit_where_only_yielding_helps(problem)
    s = _run(HEURISTIC_PHASES[:3], problem, limit)
    assert "greedy" in s.offered, s.offered
    assert s.budget.spent <= MODELLED.heuristic_share * limit + sum(
        c for c, m in RECIPES.costed(s) if m.role == "recipe") + 1e-9  # the fixed recipes run anyway


def test_without_yielding_greedy_was_cut() -> None:
    """The same phases with a grid that keeps its whole share skip greedy: the test above can fail."""
    problem = _problem()
    limit = _the_limit_where_only_yielding_helps(problem)
    zb, _, recipes = HEURISTIC_PHASES[:3]
    s = _run((zb, GridPhase(), recipes), problem, limit)
    assert "greedy" not in s.offered, s.offered


@pytest.mark.parametrize("limit", [0.05, 10.0])
def test_the_grid_keeps_its_share_where_yielding_buys_nothing(limit: float) -> None:
    """At a large limit every recipe runs anyway; at a tiny one greedy would not fit even without the
    grid: in both the grid is sized exactly as before."""
    problem = _problem()
    s = _search(problem, limit)
    if ZBConstructionsPhase().applies(s):
        ZBConstructionsPhase().run(s)
    grid = HEURISTIC_PHASES[1]
    assert isinstance(grid, GridPhase)
    assert grid.part(s) == 1.0

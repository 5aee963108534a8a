"""The scale search after the zero-bubble grid: only adds candidates, counted, deterministic."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pipesched.solver import Instance
from pipesched.solver.budget import REFINE_POLICIES, grid_seconds
from pipesched.solver.heuristics import zero_bubble as zb
from pipesched.solver.heuristics.zb_policies import Policy
from pipesched.solver.heuristics.zb_refine import refine_scale
from pipesched.solver.timing.retime import compact, order_score

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from cases import tuning  # noqa: E402  (the tuning set: tests may look at it, reports may not)


def _deep_case() -> Instance:
    case = next(c for c in tuning() if c.problem.devices == 32 and c.problem.stages_per_device == 1)
    return Instance.from_problem(case.problem)


def test_the_search_never_loses_the_grid_best_and_is_deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    inst = _deep_case()
    seconds = grid_seconds(inst, 60)
    with_search = [c.objective for c in zb.zb_candidates(inst, seconds)]
    assert with_search == [c.objective for c in zb.zb_candidates(inst, seconds)]  # same on every run
    monkeypatch.setattr(zb, "refine_trials", lambda *args: 0)
    grid_only = [c.objective for c in zb.zb_candidates(inst, seconds)]
    assert with_search[0] <= grid_only[0]
    assert set(grid_only) <= set(with_search)  # it adds orders, it drops none
    assert len(with_search) - len(grid_only) <= REFINE_POLICIES


def test_the_trial_count_follows_the_nominal_budget() -> None:
    inst = _deep_case()
    grid = len(zb.policies(inst, grid_seconds(inst, 60)))
    assert zb.refine_trials(inst, None, grid) == 0  # no budget: no search
    assert zb.refine_trials(inst, grid_seconds(inst, 60), grid) == REFINE_POLICIES
    tiny = grid * inst.num_ops / zb.GRID_OPS_PER_SECOND  # exactly the grid's own work: nothing left
    assert zb.refine_trials(inst, tiny, grid) == 0


def test_refine_moves_only_the_scale_and_stops_at_its_count() -> None:
    inst = _deep_case()
    start = Policy(-2, "eager", scale=2.15)
    order = zb.zb_order(inst, start)
    score = order_score(inst, order, compact(inst, order))
    found = refine_scale(inst, start, score, 5, zb.zb_order)
    assert 0 < len(found) <= 5
    assert refine_scale(inst, Policy(None, "eager"), score, 5, zb.zb_order) == []  # memory-capped: no scale
    assert refine_scale(inst, start, score, 0, zb.zb_order) == []

"""One rule each: the memory tolerance, the infeasibility check, the warm start, the budget's home."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from pipesched.solver import Instance, Problem, SolveOptions, solve
from pipesched.solver.bounds.feasibility import infeasibility_reason
from pipesched.solver.core.tolerance import cap_with_slack, slack, within_cap
from pipesched.solver.heuristics.warm_start import hint_start

SOLVER = Path(__file__).resolve().parents[2] / "solver"


def test_a_level_at_its_cap_up_to_float_noise_is_within_it() -> None:
    assert within_cap(0.1 + 0.2, 0.3)  # 0.30000000000000004
    assert not within_cap(0.3 + 1e-6, 0.3)
    assert within_cap(0.0, 0.0) and not within_cap(1e-9, 0.0)
    assert within_cap(1e300, float("inf"))
    assert cap_with_slack(4.0) == 4.0 * (1 + 1e-9) + 1e-12


def test_slack_is_relative_above_one_and_absolute_below() -> None:
    assert slack(1e6) == pytest.approx(1e-3)
    assert slack(0.5) == slack(-0.5) == 1e-9


def test_an_op_larger_than_the_cap_is_not_infeasible_when_earlier_ops_free_memory() -> None:
    """F frees 1 before B takes 2: under a cap of 1.5 a microbatch peaks at 1, so schedules exist.
    ``ilp`` used to call this infeasible (B alone allocates 2); every method now asks the one check."""
    problem = Problem(devices=2, microbatches=2,
                      memory={"forward": -1, "backward_input": 2, "backward_weight": -1, "limit": 1.5})
    assert infeasibility_reason(Instance.from_problem(problem)) is None
    ilp = solve(problem, "ilp", SolveOptions(time_limit_s=20))
    cpsat = solve(problem, "cpsat", SolveOptions(time_limit_s=20))
    assert ilp.status == cpsat.status == "optimal"
    assert ilp.objective_value == pytest.approx(cpsat.objective_value)


@pytest.mark.parametrize("method", ["ilp", "cpsat", "auto"])
def test_every_exact_method_reports_the_same_infeasibility(method: str) -> None:
    problem = Problem(devices=2, microbatches=2, memory={"limit": 0.5})
    schedule = solve(problem, method, SolveOptions(time_limit_s=5))
    assert schedule.status == "infeasible"
    assert schedule.reason == infeasibility_reason(Instance.from_problem(problem))


def test_a_hint_from_a_problem_with_other_costs_warm_starts_this_one() -> None:
    base = Problem(devices=3, microbatches=4)
    other = base.model_copy(update={"costs": base.costs.model_copy(update={"forward": 2.0})})
    hint = solve(other, "1f1b")
    inc = hint_start(Instance.from_problem(base), hint)
    assert inc is not None
    assert inc.objective == pytest.approx(solve(base, "1f1b").objective_value)
    assert hint_start(Instance.from_problem(Problem(devices=3, microbatches=5)), hint) is None  # other op set


@pytest.mark.parametrize("method", ["cpsat", "auto", "ilp"])
def test_a_hint_of_fewer_microbatches_is_ignored_not_scheduled(method: str) -> None:
    """cpsat used to time the hint's order as given and fail validation on the missing microbatch."""
    hint = solve(Problem(devices=3, microbatches=4), "1f1b")
    schedule = solve(Problem(devices=3, microbatches=5), method, SolveOptions(time_limit_s=5, hint=hint))
    assert schedule.status == "optimal"
    assert len(schedule.ops) == 3 * 3 * 5


#: Names of calibrated constants and policy numbers of the solving layers: they live in ``solver/budget/`` only.
BUDGET_NAME = re.compile(r"(_SHARE|_S_PER_OP|_PER_SECOND|_OVERSHOOT_S|_MAX_S|_MIN_S|_START_S|_OPS|_WORK|"
                         r"_PAIRS|_PER_PAIR|_POLICIES|_STOP)$")


def test_every_calibrated_constant_lives_in_the_budget_module() -> None:
    elsewhere = []
    for path in SOLVER.rglob("*.py"):
        if {"budget", "planning", "costmodel", "formats"} & set(path.relative_to(SOLVER).parts):  # the budget; not solving
            continue
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
            elsewhere += [f"{path.relative_to(SOLVER)}: {t.id}" for t in targets
                          if isinstance(t, ast.Name) and BUDGET_NAME.search(t.id)]
    assert not elsewhere, "move to solver/budget/: " + ", ".join(elsewhere)

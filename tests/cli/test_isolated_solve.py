"""``pipesched solve`` solves in a forked child: a native crash there is retried with one worker,
then reported in one line; errors the solve raises come back as themselves."""

from __future__ import annotations

import os

import pytest

from pipesched.solver import Problem, SolveOptions, solve, validate
from pipesched.solver.core.errors import NotApplicableError
from pipesched.solver.isolated import SolverCrashed, solve_isolated

PROBLEM = Problem(devices=2, microbatches=4)


def _aborts_with_two_workers(problem: Problem, method: str, options: SolveOptions):  # noqa: ANN201
    """A real native-style death (SIGABRT, as OR-Tools' heap check does) unless one worker is asked."""
    if options.workers > 1:
        os.abort()
    return solve(problem, method, options)


def _always_aborts(problem: Problem, method: str, options: SolveOptions):  # noqa: ANN201
    os.abort()


def test_a_child_that_aborts_is_solved_again_with_one_worker(capsys: pytest.CaptureFixture[str]) -> None:
    got = solve_isolated(PROBLEM, "auto", SolveOptions(time_limit_s=2), _aborts_with_two_workers)
    assert validate(got) == [] and got.objective_value == solve(PROBLEM, "auto").objective_value
    err = capsys.readouterr().err
    assert "killed by SIGABRT" in err and "solving again with one worker" in err


def test_a_child_that_dies_again_raises_naming_the_signal() -> None:
    with pytest.raises(SolverCrashed, match="killed by SIGABRT"):
        solve_isolated(PROBLEM, "auto", SolveOptions(time_limit_s=2), _always_aborts)


def test_errors_of_the_solve_come_back_as_themselves() -> None:
    with pytest.raises(NotApplicableError):
        solve_isolated(Problem(devices=2, microbatches=4, stages_per_device=2), "1f1b", SolveOptions())


def test_the_default_solve_gives_the_in_process_answer() -> None:
    got, here = solve_isolated(PROBLEM, "zb-h1", SolveOptions()), solve(PROBLEM, "zb-h1")
    assert got.model_dump(exclude={"solve_time_s"}) == here.model_dump(exclude={"solve_time_s"})

"""A memory limit relative to 1F1B (``"1.5x1f1b"``): resolved to numbers at validation, equal to the
1F1B recipe's own peaks, and a warning when no limit is set and the answer holds more than 1F1B."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pipesched.solver import Problem, solve
from pipesched.solver.core.canonical import problem_key


@settings(max_examples=40, deadline=None)
@given(p=st.integers(1, 5), m=st.integers(1, 9), split=st.booleans(),
       f=st.lists(st.integers(1, 4), min_size=5, max_size=5), b=st.lists(st.integers(-2, 2), min_size=5, max_size=5))
def test_the_closed_form_is_the_1f1b_recipes_peak(p: int, m: int, split: bool, f: list[int], b: list[int]) -> None:
    fwd, bi = [float(x) for x in f[:p]], [float(max(-x, y)) for x, y in zip(f[:p], b[:p], strict=True)]
    problem = Problem(devices=p, microbatches=m, split_backward=split,
                      memory={"forward": fwd, "backward_input": bi, "backward_weight": [-x - y for x, y in zip(fwd, bi, strict=True)]})
    assert solve(problem, "1f1b").peak_memory == pytest.approx(problem.one_f_one_b_peaks())


def test_a_relative_limit_resolves_to_numbers_shared_by_key_solver_and_validator() -> None:
    relative = Problem.model_validate({"devices": 4, "microbatches": 8, "memory": {"limit": "1.5x1f1b"}})
    assert relative.memory.limit == [6.0, 4.5, 3.0, 1.5]
    explicit = Problem.model_validate({"devices": 4, "microbatches": 8, "memory": {"limit": [6, 4.5, 3, 1.5]}})
    assert problem_key(relative) == problem_key(explicit)
    schedule = solve(relative, "greedy")
    assert all(x <= c for x, c in zip(schedule.peak_memory, [6.0, 4.5, 3.0, 1.5], strict=True))


@pytest.mark.parametrize(("limit", "says"), [
    ("lots", "memory.limit 'lots' is not a limit: give a number, one number per device, null"),
    ("0x1f1b", "the multiple of 1F1B's peak must be > 0"),
])
def test_a_limit_text_that_is_not_a_multiple_of_1f1b_names_the_accepted_form(limit: str, says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        Problem.model_validate({"devices": 4, "microbatches": 8, "memory": {"limit": limit}})


def solve_cli(problem: dict) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipesched", "solve", "-", "--method", "gpipe"], text=True,
                          input=json.dumps(problem), capture_output=True, timeout=120)


def test_no_limit_and_a_peak_above_1f1b_is_a_warning_on_the_cli() -> None:
    done = solve_cli({"devices": 4, "microbatches": 8})
    assert done.returncode == 0, done.stderr
    assert 'warning: no memory.limit: device 0 peaks at 8, above 1F1B\'s 4 there (2x); set memory.limit, e.g. "1x1f1b"' \
        in done.stderr
    assert "warning" not in solve_cli({"devices": 4, "microbatches": 8, "memory": {"limit": "2x1f1b"}}).stderr

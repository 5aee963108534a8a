"""``solve --hint SCHEDULE.json`` warm-starts, ``--backend cbc|highs`` picks the ILP solver, and an
unproven gap never reads "0.0%"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipesched.cli import main
from pipesched.solver import Schedule
from pipesched.solver.cli import gap_text

PROBLEM = {"devices": 2, "microbatches": 3, "memory": {"limit": 2}}


def write(tmp_path: Path, name: str, data: dict) -> str:
    (tmp_path / name).write_text(json.dumps(data))
    return str(tmp_path / name)


@pytest.mark.parametrize("backend", ["cbc", "highs"])
def test_backend_runs_that_ilp_solver(tmp_path: Path, backend: str) -> None:
    out = tmp_path / "s.json"
    assert main(["solve", write(tmp_path, "p.json", PROBLEM), "--method", "ilp", "--backend", backend,
                 "--time-limit", "20", "-o", str(out)]) == 0
    assert Schedule.model_validate_json(out.read_text()).status == "optimal"


def test_hint_warm_starts_from_a_schedule_of_the_same_problem(tmp_path: Path) -> None:
    problem, hint, out = write(tmp_path, "p.json", PROBLEM), tmp_path / "hint.json", tmp_path / "s.json"
    assert main(["solve", problem, "--method", "1f1b", "-o", str(hint)]) == 0
    assert main(["solve", problem, "--method", "cpsat", "--hint", str(hint), "--time-limit", "10", "-o", str(out)]) == 0
    solved = Schedule.model_validate_json(out.read_text())
    assert solved.objective_value <= Schedule.model_validate_json(hint.read_text()).objective_value


def test_a_hint_for_another_problem_or_a_backend_without_ilp_is_one_line_exit_2(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    problem, hint = write(tmp_path, "p.json", PROBLEM), tmp_path / "hint.json"
    assert main(["solve", write(tmp_path, "q.json", {**PROBLEM, "microbatches": 4}), "--method", "1f1b",
                 "-o", str(hint)]) == 0
    capsys.readouterr()
    assert main(["solve", problem, "--method", "auto", "--hint", str(hint)]) == 2
    assert "--hint" in capsys.readouterr().err
    assert main(["solve", problem, "--method", "auto", "--backend", "highs"]) == 2
    assert "only --method ilp has backends" in capsys.readouterr().err


def test_an_unproven_gap_shows_enough_digits_not_to_look_proven() -> None:
    assert gap_text(0.0004, "feasible") == "0.04%"
    assert gap_text(2e-9, "feasible") == "2.0e-07%"
    assert gap_text(0.25, "feasible") == "25.0%" and gap_text(0.0, "optimal") == "0.0%"

"""The ``pipesched`` console script: solve, methods, validate, render and one-line errors."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pipesched.cli import main
from pipesched.solver import Schedule, validate

PROBLEM = {"devices": 3, "microbatches": 4, "costs": {"comm": 0.5}}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["pipesched", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def problem_file(tmp_path: Path) -> Path:
    path = tmp_path / "problem.json"
    path.write_text(json.dumps(PROBLEM))
    return path


def test_solve_writes_a_valid_schedule_to_stdout_and_a_summary_to_stderr(problem_file: Path) -> None:
    result = run("solve", str(problem_file), "--method", "gpipe")
    assert result.returncode == 0, result.stderr
    schedule = Schedule.model_validate_json(result.stdout)
    assert schedule.method == "gpipe" and validate(schedule) == []
    assert "makespan" in result.stderr and "lower bound" in result.stderr and "peak memory per device" in result.stderr
    assert "Traceback" not in result.stderr


def test_solve_with_output_and_svg_writes_both_files(problem_file: Path, tmp_path: Path) -> None:
    out, svg = tmp_path / "s.json", tmp_path / "g.svg"
    code = main(["solve", str(problem_file), "-m", "gpipe", "-o", str(out), "--svg", str(svg)])
    assert code == 0
    assert validate(Schedule.model_validate_json(out.read_text())) == []
    assert svg.read_text().startswith("<svg")


def test_solve_defaults_to_a_registered_method_and_honours_the_time_limit(problem_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    assert main(["solve", str(problem_file), "--time-limit", "2", "-o", str(out)]) == 0
    assert validate(Schedule.model_validate_json(out.read_text())) == []


def test_solve_exits_1_with_the_reason_when_memory_makes_the_problem_infeasible(tmp_path: Path) -> None:
    path = tmp_path / "tight.json"
    path.write_text(json.dumps({"devices": 2, "microbatches": 2, "memory": {"limit": 0.5}}))
    result = run("solve", str(path), "-m", "cpsat", "--time-limit", "5")
    assert result.returncode == 1, result.stderr
    assert Schedule.model_validate_json(result.stdout).status == "infeasible"
    assert "no schedule: memory.limit 0.5" in result.stderr and "Traceback" not in result.stderr


def test_a_method_that_refuses_the_memory_limit_exits_2_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "tight.json"
    path.write_text(json.dumps({"devices": 2, "microbatches": 2, "memory": {"limit": 1.5}}))
    result = run("solve", str(path), "-m", "gpipe")  # a recipe that would exceed the cap refuses it
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "memory.limit 1.5" in result.stderr


def test_greedy_on_a_cap_no_schedule_fits_exits_1_with_the_reason_like_cpsat(tmp_path: Path) -> None:
    path = tmp_path / "tight.json"
    path.write_text(json.dumps({"devices": 2, "microbatches": 2, "memory": {"limit": 0.5}}))
    result = run("solve", str(path), "-m", "greedy")
    assert result.returncode == 1, result.stderr
    assert Schedule.model_validate_json(result.stdout).status == "infeasible"
    assert "no schedule: memory.limit 0.5" in result.stderr and "Traceback" not in result.stderr


def test_methods_lists_every_registered_method_with_when_it_applies(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["methods"]) == 0
    out = capsys.readouterr().out
    for name in ("gpipe", "1f1b", "zb-h1", "greedy"):
        assert any(line.startswith(name + " ") for line in out.splitlines()), name


def test_validate_accepts_a_solved_schedule(problem_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    assert main(["solve", str(problem_file), "-m", "gpipe", "-o", str(out)]) == 0
    result = run("validate", str(problem_file), str(out))
    assert result.returncode == 0 and result.stdout.startswith("valid")


def test_validate_lists_every_violation_of_a_tampered_schedule(problem_file: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s.json"
    assert main(["solve", str(problem_file), "-m", "gpipe", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    data["ops"][1]["start"] -= 0.5  # overlaps its neighbour and breaks its duration
    data["makespan"] = 1.0  # a wrong reported figure
    out.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["validate", str(problem_file), str(out)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("invalid:")
    assert any("lasts" in x for x in lines) and any("reported makespan" in x for x in lines)
    assert len(lines) >= 3


def test_validate_reports_ops_on_devices_that_do_not_exist(problem_file: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s.json"
    assert main(["solve", str(problem_file), "-m", "gpipe", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    data["ops"][0]["device"] = 7
    out.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["validate", str(problem_file), str(out)]) == 1
    assert "runs on device 7" in capsys.readouterr().out
    assert main(["render", str(out), "-o", str(tmp_path / "g.svg")]) == 0


def test_validate_says_when_the_schedule_belongs_to_another_problem(problem_file: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out, other = tmp_path / "s.json", tmp_path / "other.json"
    other.write_text(json.dumps({**PROBLEM, "microbatches": 5}))
    assert main(["solve", str(other), "-m", "gpipe", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["validate", str(problem_file), str(out)]) == 1
    text = capsys.readouterr().out
    assert "different problem" in text and "microbatches: 5 in the schedule, 4 in the problem" in text


@pytest.mark.parametrize(
    ("content", "args", "expected"),
    [
        (None, ["solve", "{missing}"], "cannot read problem file"),
        ("{not json", ["solve", "{file}"], "not valid JSON"),
        ('{"devices": 0, "microbatches": 2}', ["solve", "{file}"], "devices must be >= 1"),
        ('{"devices": 2, "microbatches": 2, "costs": {"forward": [1, 2, 3]}}', ["solve", "{file}"], "costs.forward"),
        ('{"devices": 2, "microbatches": 2, "colour": 1}', ["solve", "{file}"], "colour"),
        (json.dumps(PROBLEM), ["solve", "{file}", "-m", "no-such-method"], "unknown method 'no-such-method'"),
        (json.dumps(PROBLEM), ["solve", "{file}", "-m", "zb-v"], "does not apply"),
        (json.dumps(PROBLEM), ["solve", "{file}", "-m", "gpipe", "--time-limit", "-1"], "--time-limit"),
        (json.dumps(PROBLEM), ["validate", "{file}", "{missing}"], "cannot read schedule file"),
        (json.dumps(PROBLEM), ["render", "{file}", "-o", "x.svg"], "invalid schedule"),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_problem(tmp_path: Path, content: str | None, args: list[str],
                                                            expected: str, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process (the console script is ``main``; the test below runs it as a command)."""
    path = tmp_path / "input.json"
    if content is not None:
        path.write_text(content)
    argv = [a.format(file=path, missing=tmp_path / "missing.json") for a in args]
    monkeypatch.chdir(tmp_path)
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own refusals
        code = e.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert expected in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_bad_input_from_the_console_script_is_exit_2_and_one_line(tmp_path: Path) -> None:
    path = tmp_path / "input.json"
    path.write_text('{"devices": 2, "microbatches": 2, "costs": {"forward": [1, 2, 3]}}')
    for argv in (["solve", str(path)], ["solve", str(path), "--time-limit", "-1"]):
        result = subprocess.run(["pipesched", *argv], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr

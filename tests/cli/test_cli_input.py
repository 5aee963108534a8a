"""Bad input files are one ``pipesched: error:`` line and exit 2; ``-`` reads the problem from stdin."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipesched.cli import main


def one_error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pipesched: error: ") and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(("content", "says"), [
    (b'{"devices": 2, "microbatches": 2, "costs": {"forward": "\xff"}}', "not UTF-8 text (byte 0xff at offset"),
    (b"[" * 100_000 + b"]" * 100_000, "JSON nested too deeply"),
    (b'{"devices": 4, "microbatches": 4, "costs": {"forward": 1e308}}',
     "costs.forward must be a finite number of magnitude <= 1e+12 (got 1e+308)"),
    (b'{"devices": 4, "microbatches": 4, "memory": {"forward": 1e13, "backward_weight": -1e13}}',
     "memory.forward must be a finite number of magnitude <= 1e+12"),
    (b'{"devices": 4, "microbatches": 4, "costs": {"forward": 5e-324}}',  # subnormal: ratios overflowed
     "costs.forward must be 0 or of magnitude >= 1e-09 (got 4.94066e-324)"),
])
def test_an_unreadable_problem_is_one_line_and_exit_2(tmp_path: Path, capsys, content: bytes, says: str) -> None:  # noqa: ANN001
    path = tmp_path / "problem.json"
    path.write_bytes(content)
    for argv in (["solve", str(path), "--method", "gpipe"], ["validate", str(path), str(path)]):
        assert says in one_error_line(capsys, argv)


def test_a_negative_scalar_cost_is_reported_once(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    path = tmp_path / "problem.json"
    path.write_text(json.dumps({"devices": 4, "microbatches": 4, "costs": {"forward": -1}}))
    err = one_error_line(capsys, ["solve", str(path)])
    assert "costs.forward must be >= 0 (got -1)" in err and "forward[" not in err


def test_solve_dash_reads_the_problem_from_stdin() -> None:
    done = subprocess.run([sys.executable, "-m", "pipesched", "solve", "-", "--method", "1f1b"],
                          input=json.dumps({"devices": 2, "microbatches": 4}).encode(), capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["problem"]["microbatches"] == 4

"""`pipesched export` and the runtime package work without importing torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pipesched.solver import Problem, solve
from pipesched.solver.core.io import dump_json
from pipesched.solver.formats.torch_csv import to_torch_csv


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipesched", *args], capture_output=True, text=True, timeout=60)


def test_export_writes_the_torch_csv(tmp_path: Path) -> None:
    schedule = solve(Problem(devices=2, microbatches=3, stages_per_device=2, placement="v"), "zb-v")
    src = tmp_path / "schedule.json"
    src.write_text(dump_json(schedule))
    out = tmp_path / "schedule.csv"
    done = _run("export", str(src), "--format", "torch-csv", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_text() == to_torch_csv(schedule)
    assert out.read_text().splitlines()[0].startswith("0F0,")


def test_export_of_a_bad_file_is_one_line_and_a_nonzero_exit(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"problem": {"devices": 0}, "ops": []}')
    done = _run("export", str(bad), "-o", str(tmp_path / "x.csv"))
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1 and "invalid schedule" in done.stderr, done.stderr
    assert not (tmp_path / "x.csv").exists()


def test_runtime_package_and_cli_import_without_torch() -> None:
    code = ("import sys, pipesched.runtime, pipesched.runtime.cli, pipesched.runtime.replay.plan; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr

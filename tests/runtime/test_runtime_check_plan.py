"""``python -m pipesched.runtime.check --plan PLAN.json``: a plan's split, recompute flags and schedule
replay on gloo ranks with the unsplit model's gradients; a file that is not a replayable plan is one
readable line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from runtime_limits import GROUP_TIMEOUT_S

from pipesched.runtime.check import main as check

TOLERANCE = 1e-5


def _plan(tmp_path: Path, model: dict, cluster: dict) -> Path:
    (tmp_path / "in.json").write_text(json.dumps({"model": model, "cluster": cluster}))
    out = tmp_path / "plan.json"
    planned = subprocess.run(["pipesched", "plan", str(tmp_path / "in.json"), "--time-limit", "2", "-o", str(out)],
                             capture_output=True, text=True, timeout=120)
    assert planned.returncode == 0, planned.stderr
    return out


def _diff(out: str) -> float:
    return float(out.split("max_grad_diff=")[1].split()[0])


def test_a_planned_v_split_replays_with_the_reference_gradients(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    model = {"layers": [
        {"name": "embed", "forward": 0.1, "backward_weight": 0.1, "output": 0.01},
        {"name": "block", "repeat": 5, "forward": 1.0, "backward_input": 1.0, "backward_weight": 1.0, "output": 0.01},
        {"name": "head", "forward": 2.5, "backward_input": 2.5, "backward_weight": 2.5}]}
    plan = _plan(tmp_path, model, {"devices": 2, "stages_per_device": 2, "placement": "v", "microbatches": 4})
    assert check(["--plan", str(plan), "--timeout", str(GROUP_TIMEOUT_S)]) == 0
    out = capsys.readouterr().out
    assert "placement=v" in out and _diff(out) <= TOLERANCE


def test_a_plan_that_recomputes_replays_its_recompute_from_the_command_line(tmp_path: Path) -> None:
    """Memory tight enough that the planner recomputes: the replay checkpoints those stages."""
    mem = {"forward": 1.0, "backward_input": -0.5, "backward_weight": -0.5}
    model = {"layers": [
        {"name": "embed", "forward": 0.1, "backward_weight": 0.1, "output": 0.01, "static": 0.1},
        {"name": "block", "repeat": 6, "forward": 1.0, "backward_input": 1.0, "backward_weight": 1.0,
         "output": 0.01, "static": 0.1, "memory": mem,
         "recompute": {"memory": {"forward": 0.05, "backward_input": 0.45, "backward_weight": -0.5}}},
        {"name": "head", "forward": 2.0, "backward_input": 2.0, "backward_weight": 2.0, "static": 0.1,
         "memory": mem}]}
    plan = _plan(tmp_path, model, {"devices": 4, "microbatches": 8, "memory_per_device": 4})
    recomputed = [st["stage"] for st in json.loads(plan.read_text())["stages"] if st["recompute"]]
    assert recomputed, "the planner chose no recompute: the test would not exercise it"
    run = subprocess.run([sys.executable, "-m", "pipesched.runtime.check", "--plan", str(plan),
                          "--timeout", str(GROUP_TIMEOUT_S)], capture_output=True, text=True,
                         timeout=GROUP_TIMEOUT_S + 30)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"recompute={recomputed}" in run.stdout and _diff(run.stdout) <= TOLERANCE


def test_a_file_that_is_not_a_plan_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.json").write_text(json.dumps({"devices": 2}))
    assert check(["--plan", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"check: error: {tmp_path / 'x.json'}: not a plan (no 'stages'; make one with pipesched plan -o)"
    (tmp_path / "y.json").write_text(json.dumps({"stages": [], "status": "infeasible", "reason": "too big"}))
    assert check(["--plan", str(tmp_path / "y.json")]) == 2
    assert "status 'infeasible' and no schedule to replay (too big)" in capsys.readouterr().err
    assert check(["--plan", str(tmp_path / "missing.json")]) == 2
    assert capsys.readouterr().err.startswith("check: error: cannot read")

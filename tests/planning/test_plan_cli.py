"""``pipesched plan``: a validated plan with its exports, one-line errors, exit codes as ``solve``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from planning_models import small_model

from pipesched.cli import main
from pipesched.solver import validate
from pipesched.solver.planning import Cluster
from pipesched.solver.planning.cli import _gap
from pipesched.solver.planning.exports import bounds_from_layout
from pipesched.solver.planning.plan import Plan

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plan_small.json"
CLUSTER = {"devices": 2, "microbatches": 4, "memory_per_device": 40.0, "link": {"latency": 0.1}}


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    model, cluster = tmp_path / "model.json", tmp_path / "cluster.json"
    model.write_text(small_model(4).model_dump_json())
    cluster.write_text(json.dumps(CLUSTER))
    return model, cluster


def test_the_example_plans_through_the_console_script() -> None:
    result = subprocess.run(["pipesched", "plan", str(EXAMPLE), "--time-limit", "3"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    plan = Plan.model_validate_json(result.stdout)
    assert plan.schedule is not None and validate(plan.schedule) == []
    assert plan.exports is not None and plan.exports.torch_csv.startswith("0F0")
    layers = plan.model.expanded()
    bounds = [0, *(st.layers[1] for st in plan.stages)]
    assert bounds_from_layout(plan.exports.megatron_layout, layers) == bounds
    assert "step time" in result.stderr and "lower bound over all splits" in result.stderr
    assert "Traceback" not in result.stderr


def test_model_and_cluster_files_with_output(files: tuple[Path, Path], tmp_path: Path) -> None:
    model, cluster = files
    out = tmp_path / "plan.json"
    assert main(["plan", str(model), "--cluster", str(cluster), "--time-limit", "2", "-o", str(out),
                 "--module-names", "embed;h.{i};ln_f,lm_head"]) == 0
    plan = Plan.model_validate_json(out.read_text())
    assert plan.exports is not None and plan.exports.torchtitan_module_fqns[0][0] == "embed"
    assert plan.exports.torchtitan_module_fqns[-1][-2:] == ["ln_f", "lm_head"]
    assert all(peak <= 40.0 for peak in plan.peak_memory)


def test_an_infeasible_model_exits_1_with_the_reason(files: tuple[Path, Path], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    model, _ = files
    tight = tmp_path / "tight.json"
    tight.write_text(json.dumps({**CLUSTER, "memory_per_device": 7.5}))
    assert main(["plan", str(model), "--cluster", str(tight), "--time-limit", "2"]) == 1
    assert "no plan: layer 5 (head) needs 8" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--time-limit", "0"], "--time-limit must be > 0 seconds"),
    (["--module-names", "a;b;c"], "--module-names must be INPUT;BLOCK;OUTPUT"),
    (["--module-names", "a;b.{i}.{j};c"], "no other braces"),
    (["--method", "nope"], "unknown method 'nope'"),
])
def test_bad_options_are_one_line_errors(files: tuple[Path, Path], args: list[str], message: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    model, cluster = files
    assert main(["plan", str(model), "--cluster", str(cluster), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pipesched: error: ") and message in err and err.count("\n") == 1


def test_bad_files_name_the_file_and_field_and_leave_the_output_alone(
        files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model, cluster = files
    out = tmp_path / "plan.json"
    out.write_text("kept")
    bad_cluster = tmp_path / "bad.json"
    bad_cluster.write_text(json.dumps({**CLUSTER, "devices": 0}))
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    for args, message in [
        ([str(model), "--cluster", str(bad_cluster)], "bad.json: invalid cluster: devices: Input should be"),
        ([str(broken), "--cluster", str(cluster)], "broken.json: not valid JSON"),
        ([str(model)], "no cluster: pass --cluster"),
        ([str(model), "--cluster", str(tmp_path / "missing.json")], "cannot read cluster file"),
    ]:
        assert main(["plan", *args, "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("pipesched: error: ") and message in err, err
    assert out.read_text() == "kept"


def test_an_unproven_gap_never_reads_zero() -> None:
    plan = Plan(model=small_model(2), cluster=Cluster(**CLUSTER), method="auto", status="feasible",
                step_time=2527.8, lower_bound=2527.6)
    assert _gap(plan) == "0.01%"
    assert _gap(plan.model_copy(update={"status": "optimal", "lower_bound": 2527.8})) == "0.0%"

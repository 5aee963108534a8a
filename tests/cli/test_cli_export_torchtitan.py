"""``pipesched export PLAN.json --format torchtitan``: the CSV, the flags whose schedule class places the
stages as the plan does, the config module, and one line for what torchtitan cannot take (torch-free;
the flags are run in torchtitan itself by tests/runtime/test_runtime_torchtitan.py)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from pipesched.cli import build_parser, main
from pipesched.solver import solve
from pipesched.solver.core.io import dump_json
from pipesched.solver.costmodel.hardware import DEVICES
from pipesched.solver.costmodel.transformer import TransformerConfig, transformer_model
from pipesched.solver.formats.torch_csv import to_torch_csv
from pipesched.solver.planning import Cluster, Plan, plan
from pipesched.solver.planning.exports import TORCHTITAN_NAMES, TORCHTITAN_VERSION

#: torchtitan's Llama3 debug model (6 blocks of width 256), 2 sequences of 16 tokens per microbatch.
DEBUG_LLAMA = TransformerConfig(hidden=256, layers=6, heads=16, kv_heads=16, ffn=768, vocab=2048, seq=16,
                                microbatch_size=2)
CASES = {"v1": ({}, "1F1B", 1), "loop-v2": ({"stages_per_device": 2}, "Interleaved1F1B", 2),
         "v-shape": ({"stages_per_device": 2, "placement": "v"}, "ZBVZeroBubble", 2)}


@pytest.fixture(scope="module")
def plans() -> dict[str, Plan]:
    model = transformer_model(DEBUG_LLAMA, DEVICES["h100"])
    return {name: plan(model, Cluster(devices=2, microbatches=4, **extra), "auto", 2.0)
            for name, (extra, _, _) in CASES.items()}


def _flags(out: str) -> dict[str, list[str]]:
    """The printed line as ``{flag: [values]}``."""
    assert out.count("\n") == 1, out
    parsed: dict[str, list[str]] = {}
    for word in shlex.split(out):
        if word.startswith("--"):
            parsed[word] = current = []
        else:
            current.append(word)
    return parsed


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_flags_run_the_plan_with_the_class_that_places_its_stages(
        case: str, plans: dict[str, Plan], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    found = plans[case]
    path = tmp_path / "plan.json"
    path.write_text(found.model_dump_json())
    assert main(["export", str(path), "--format", "torchtitan"]) == 0
    out, err = capsys.readouterr()
    flags = _flags(out)
    _, cls, v = CASES[case]
    assert flags["--parallelism.pipeline_parallel_schedule"] == [cls]
    assert flags["--parallelism.pipeline_parallel_degree"] == ["2"]
    parts = [names.split(",") for names in flags["--parallelism.module_fqns_per_model_part"]]
    assert parts == found.exports.torchtitan_module_fqns and len(parts) == 2 * v
    assert [x for part in parts for x in part] == ["tok_embeddings", *(f"layers.{i}" for i in range(6)),
                                                    "norm", "lm_head"]
    assert flags["--parallelism.pipeline_parallel_microbatch_size"] == ["2"]
    assert flags["--training.local_batch_size"] == [str(4 * 2)]  # microbatches x microbatch size
    assert flags["--training.seq_len"] == ["16"]
    assert flags["--training.disable_cuda_graphs"] == ["activation_checkpoint:none"]  # tyro's subcommand, last
    assert shlex.split(out)[-1] == "activation_checkpoint:none"
    csv = Path(flags["--parallelism.pipeline_parallel_schedule_csv"][0])
    assert csv == path.with_suffix(".csv").resolve() and csv.read_text() == to_torch_csv(found.schedule)
    assert "warning" not in err and f"torchtitan {TORCHTITAN_VERSION}" in err


def test_with_a_folder_it_writes_the_plan_and_a_config_module_beside_the_csv(
        plans: dict[str, Plan], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, folder = tmp_path / "p.json", tmp_path / "job"
    src.write_text(plans["v-shape"].model_dump_json())
    assert main(["export", str(src), "--format", "torchtitan", "-o", str(folder),
                 "--base", "torchtitan.models.llama3.config_registry:llama3_8b"]) == 0
    flags = _flags(capsys.readouterr().out)
    assert flags["--parallelism.pipeline_parallel_schedule_csv"] == [str((folder / "schedule.csv").resolve())]
    assert Plan.model_validate_json((folder / "plan.json").read_text()) == plans["v-shape"]
    module = (folder / "pipesched_job.py").read_text()
    compile(module, "pipesched_job.py", "exec")
    assert "from torchtitan.models.llama3.config_registry import llama3_8b as base" in module
    assert "def job():" in module


def test_what_torchtitan_cannot_take_is_one_line_each(plans: dict[str, Plan], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    found = plans["v1"].model_copy(deep=True)
    found.stages[1] = found.stages[1].model_copy(update={"recompute": True})
    found.model = found.model.model_copy(update={"microbatch_size": None})
    path = tmp_path / "plan.json"
    path.write_text(found.model_dump_json())
    assert main(["export", str(path), "--format", "torchtitan"]) == 0
    out, err = capsys.readouterr()
    warnings = [line for line in err.splitlines() if line.startswith("pipesched: warning:")]
    assert len(warnings) == 2, err
    assert "recomputes stage(s) 1" in warnings[1] and "cannot express" in warnings[1]
    assert "no microbatch_size" in warnings[0]
    assert _flags(out)["--training.local_batch_size"] == ["4"]  # 1 sequence per microbatch


def test_a_schedule_or_a_dual_plan_is_refused_in_one_line(plans: dict[str, Plan], tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    schedule = tmp_path / "s.json"
    schedule.write_text(dump_json(plans["v1"].schedule))
    assert main(["export", str(schedule), "--format", "torchtitan"]) == 2
    assert "needs a plan" in capsys.readouterr().err
    dual = plans["v1"].model_copy(deep=True)
    problem = dual.schedule.problem.model_copy(update={"placement": "dual", "stages_per_device": 2})
    dual.schedule = solve(problem, "dualpipe")
    path = tmp_path / "dual.json"
    path.write_text(dual.model_dump_json())
    assert main(["export", str(path), "--format", "torchtitan"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "placement 'dual'" in err and "no torchtitan schedule class" in err


def test_the_default_names_are_torchtitans_and_every_place_says_which_release(capsys) -> None:  # noqa: ANN001
    from pipesched.api.models import PlanRequest

    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["plan", "--help"])
    helptext = " ".join(capsys.readouterr().out.split())
    docs = (Path(__file__).resolve().parents[2] / "docs" / "planning.md").read_text()
    for text in (helptext, PlanRequest.model_fields["module_names"].description, docs):
        assert TORCHTITAN_NAMES in text and f"torchtitan {TORCHTITAN_VERSION}" in text


def test_the_documented_export_prints_the_documented_flags(tmp_path: Path) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "runtime.md").read_text()
    block = doc.split("## torchtitan", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line and not line.startswith("#")]
    shown = " ".join(line.lstrip("# ").split("   ")[0] for line in block.splitlines() if line.startswith("# --"))
    run = subprocess.run(["bash", "-euc", "\n".join(commands)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    printed = run.stdout.replace(str((tmp_path / "job" / "schedule.csv").resolve()), "/abs/job/schedule.csv")
    assert shlex.split(printed) == shlex.split(shown)


def test_without_a_service_url_rank_0_plans_on_its_own_machine(plans: dict[str, Plan], tmp_path: Path) -> None:
    from pipesched.integrations.torchtitan import _ask, job_of

    found = plans["v1"]
    again = _ask(found.model, found.cluster, None, None, "auto", 2.0, None)
    assert again.schedule is not None and again.exports.torchtitan_module_fqns == found.exports.torchtitan_module_fqns
    job = job_of(again, tmp_path / "deep" / "schedule.csv")
    assert job.csv_path.read_text() == to_torch_csv(again.schedule)
    assert job.values()["parallelism.pipeline_parallel_schedule_csv"] == str(job.csv_path)
    assert job.values()["activation_checkpoint"] is None and job.flags()[-1] == "activation_checkpoint:none"

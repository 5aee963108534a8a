"""``pipesched model transformer`` as functions: writes a valid Model/Cluster, one-line errors on bad input."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import pytest

from pipesched.solver.costmodel import DEVICES, TransformerConfig, transformer_model
from pipesched.solver.costmodel.cli import add_parser
from pipesched.solver.planning import Cluster, Model

LLAMA8B = ["--hidden", "4096", "--layers", "32", "--heads", "32", "--kv-heads", "8", "--ffn", "14336",
           "--vocab", "128256", "--seq", "8192", "--microbatch-size", "1"]


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="pipesched")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["model", "transformer", *argv])
    return args.handler(args)


def test_writes_the_same_model_as_the_library_call(tmp_path: Path) -> None:
    out = tmp_path / "model.json"
    assert run(*LLAMA8B, "--device", "h100", "-o", str(out)) == 0
    expected = transformer_model(TransformerConfig(hidden=4096, layers=32, heads=32, kv_heads=8, ffn=14336,
                                                   vocab=128256, seq=8192, microbatch_size=1), DEVICES["h100"])
    assert Model.model_validate_json(out.read_text()) == expected


def test_custom_device_link_and_cluster(tmp_path: Path) -> None:
    model, cluster = tmp_path / "m.json", tmp_path / "c.json"
    code = run(*LLAMA8B, "--tp", "2", "--zero", "1", "--dp", "4", "--no-flash-attention", "--device", "custom",
               "--peak-tflops", "200", "--memory-gib", "48", "--mfu", "0.45", "--link", "custom",
               "--latency-us", "50", "--gbps", "100", "-o", str(model), "--cluster-output", str(cluster),
               "--devices", "4", "--microbatches", "12")
    assert code == 0
    c = Cluster.model_validate_json(cluster.read_text())
    assert (c.devices, c.microbatches, c.memory_per_device) == (4, 12, 48.0)
    assert c.link.latency == pytest.approx(0.05)
    assert Model.model_validate_json(model.read_text()).layers[1].repeat == 32


def test_a_preset_figure_can_be_overridden(tmp_path: Path) -> None:
    base, tuned = tmp_path / "a.json", tmp_path / "b.json"
    assert run(*LLAMA8B, "--device", "a100", "-o", str(base)) == 0
    assert run(*LLAMA8B, "--device", "a100", "--mfu", "0.25", "-o", str(tuned)) == 0  # half the preset 0.5
    a, b = (Model.model_validate_json(p.read_text()).layers[1] for p in (base, tuned))
    assert b.forward == pytest.approx(2 * a.forward)


@pytest.mark.parametrize(("argv", "message"), [
    (["--heads", "30", "--device", "h100"], "hidden (4096) must be a multiple of heads (30)"),
    (["--device", "custom", "--mfu", "0.4"], "--device custom needs --peak-tflops, --memory-gib"),
    (["--device", "h100", "--mfu", "2"], "mfu must be in (0, 1]"),
    (["--device", "h100", "--link", "custom", "--gbps", "10"], "--link custom needs --latency-us"),
    (["--device", "h100", "--devices", "4"], "--devices / --microbatches only shape --cluster-output"),
    (["--device", "h100", "--cluster-output", "CLUSTER", "--devices", "0"], "devices: Input should be greater"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         argv: list[str], message: str) -> None:
    out = tmp_path / "model.json"
    out.write_text("kept")
    argv = [str(tmp_path / "c.json") if a == "CLUSTER" else a for a in argv]
    args = [*LLAMA8B, *argv] if "--heads" not in argv else [*LLAMA8B[:4], *LLAMA8B[8:], *argv]
    assert run(*args, "-o", str(out)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pipesched: error: ") and message in err and "\n" not in err
    assert out.read_text() == "kept"


def test_the_pipesched_command_runs_it(tmp_path: Path) -> None:
    out = tmp_path / "model.json"
    done = subprocess.run(["pipesched", "model", "transformer", *LLAMA8B, "--device", "h200", "-o", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert Model.model_validate_json(out.read_text()).layers[1].repeat == 32
    bad = subprocess.run(["pipesched", "model", "transformer", *LLAMA8B, "--device", "custom", "-o", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert bad.stderr.strip() == "pipesched: error: --device custom needs --peak-tflops, --memory-gib, --mfu"

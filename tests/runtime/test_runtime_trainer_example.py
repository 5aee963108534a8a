"""``examples/trainer_startup.py`` runs end to end: profile (stages, link, dispatch, contention) ->
solve (local fallback) -> replay on 2 gloo ranks, printing every term and predicted vs measured."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trainer_startup.py"


def test_the_trainer_example_prints_its_terms_and_predicted_vs_measured() -> None:
    run = subprocess.run([sys.executable, str(EXAMPLE), "--steps", "2", "--url", "http://127.0.0.1:9"],
                         capture_output=True, text=True, timeout=140)
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert re.search(r"comm \d+\.\d+ ms; dispatch \d+\.\d+ ms per op; contention x\d+\.\d+", out), out
    assert "solved locally (service unreachable)" in out
    predicted = float(re.search(r"^predicted\s+(\d+\.\d+)", out, re.M).group(1))
    measured = float(re.search(r"^measured\s+(\d+\.\d+)", out, re.M).group(1))
    bare = float(re.search(r"compute alone: (\d+\.\d+) ms", out).group(1))
    assert predicted > 0 and measured > 0
    assert predicted >= bare  # the machine's terms only add to the profiled compute
    assert re.search(r"^error [+-]\d+\.\d+% \(other processes used \d+\.\d\d of \d+ cores while it ran \((quiet|busy)", out, re.M), out

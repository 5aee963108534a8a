"""Ctrl-C and SIGTERM stop a real ``pipesched batch``: solves killed, finished work kept, summary, 130."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from process_watch import as_from_a_terminal, session_processes, wait_for

#: CBC cannot prove this one quickly (uneven costs, a tight cap): a solve that is still running.
SLOW = {"devices": 4, "microbatches": 10, "objective": "stage_span",
        "costs": {"forward": [1.0, 2.0, 1.5, 1.0], "backward_input": [2.0, 1.0, 1.0, 3.0],
                  "backward_weight": [1.0, 1.0, 2.0, 1.0]},
        "memory": {"limit": 3}}


def start_batch(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path, Path]:
    sweep = tmp_path / "sweep.jsonl"
    lines = [{"name": "quick", "problem": {"devices": 2, "microbatches": 2}}]
    lines += [{"name": f"slow{i}", "problem": {**SLOW, "microbatches": 10 + i}} for i in range(3)]
    sweep.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out, log = tmp_path / "out", tmp_path / "batch.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipesched", "batch", str(sweep), "-o", str(out), "--jobs", "1",
         "--method", "ilp", "--time-limit", "120"],
        stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=as_from_a_terminal)  # noqa: SIM115
    return proc, out, log


@pytest.mark.parametrize("how", ["ctrl-c to the process group", "sigterm to batch"])
def test_a_signal_stops_batch_keeps_finished_work_and_writes_the_summary(tmp_path: Path, how: str) -> None:
    proc, out, log = start_batch(tmp_path)
    try:
        assert wait_for(lambda: (out / "quick.json").exists(), 120), log.read_text()
        # the first slow problem is being solved: its solve process (and CBC below it) exist
        assert wait_for(lambda: len(session_processes(proc.pid)) >= 3, 60), log.read_text()
        if how.startswith("ctrl-c"):
            os.killpg(proc.pid, signal.SIGINT)  # what a terminal does
        else:
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = log.read_text()
    assert code == 130, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    assert "interrupted: 1 done, 0 failed, 3 not run" in text, text
    with open(out / "summary.csv") as f:
        rows = {r["name"]: r for r in csv.DictReader(f)}
    assert rows["quick"]["status"] in ("optimal", "feasible")
    assert [rows[f"slow{i}"]["status"] for i in range(3)] == ["not run"] * 3
    assert sorted(p.name for p in out.glob("*.json")) == ["quick.json"]
    # no solver (nor the CBC it started) outlives the batch
    assert wait_for(lambda: not session_processes(proc.pid), 10), session_processes(proc.pid)

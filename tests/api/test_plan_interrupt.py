"""Ctrl-C during ``pipesched plan`` stops it at once with exit 130 and leaves no process behind.

In-process, CP-SAT caught each SIGINT and only ended the search in hand, so a plan (many searches)
went on to a normal exit 0 about half a minute later."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from process_watch import as_from_a_terminal, busy_child, session_processes, wait_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_ctrl_c_stops_a_plan_with_130_and_no_leftover(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    # the 8B example plans for about 30 s of its 60 s limit on an idle 2-core machine
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipesched", "plan", str(EXAMPLES / "model_llama3_8b.json"),
         "--cluster", str(EXAMPLES / "plan_cluster_8xh100.json"), "--time-limit", "60", "-o", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=as_from_a_terminal)
    try:
        # the planning child is well inside the splits' searches once it has used a second of CPU
        assert wait_for(lambda: busy_child(proc.pid, 1.0), 60), session_processes(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal does
        _, err = proc.communicate(timeout=60)  # before: exit 0 about 25 s later, a plan written
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "pipesched: interrupted", err
    assert "Traceback" not in err, err
    assert not out.exists()
    assert wait_for(lambda: not session_processes(proc.pid), 10), session_processes(proc.pid)

"""Ctrl-C in a trainer whose ``Client.plan`` fell back to planning locally stops it at once.

In-process, CP-SAT caught each SIGINT and only ended the search in hand, so the plan (many searches)
went on; the fallback now plans in a forked child, as ``pipesched plan`` does."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from process_watch import as_from_a_terminal, busy_child, session_processes, wait_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

_TRAINER = """
import json, sys, time
from pipesched.client import Client
model = json.load(open(sys.argv[2]))
cluster = json.load(open(sys.argv[3]))
client = Client(sys.argv[1], fallback="local", cache_dir=False, retries=1)
print("planning", flush=True)
try:
    client.plan(model, cluster, time_limit_s=60)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
print("planned", flush=True)
"""


def _closed_port() -> int:
    with socket.socket() as s:  # bound and released: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ctrl_c_stops_a_local_fallback_plan_at_once_and_leaves_no_child() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _TRAINER, f"http://127.0.0.1:{_closed_port()}",
         str(EXAMPLES / "model_llama3_8b.json"), str(EXAMPLES / "plan_cluster_8xh100.json")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=as_from_a_terminal)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "planning"
        # the service refuses at once; the fallback's child is inside the splits' searches (about 30 s)
        # once it has used a second of CPU
        assert wait_for(lambda: busy_child(proc.pid, 1.0), 60), session_processes(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal does
        out, err = proc.communicate(timeout=60)  # before: the plan went on and printed "planned"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, (out, err)
    assert out.strip() == "interrupted", (out, err)  # the rest of stdout, after "planning"
    assert wait_for(lambda: not session_processes(proc.pid), 10), session_processes(proc.pid)

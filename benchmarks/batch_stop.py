"""How long ``pipesched batch`` takes to stop after Ctrl-C / SIGTERM (issue 13 target: within 2 s).

Each trial starts a real batch of ILP problems that CBC cannot prove quickly (``--jobs 2``), waits
for the first finished schedule and for the solves of the next ones to be running, sends the signal
(SIGINT to the process group, as a terminal does, or SIGTERM to the batch alone) and measures the
wall time until the batch has exited and no process of its session is left.

    python benchmarks/batch_stop.py [--trials 3]

Writes benchmarks/results/batch_stop.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from report import command_line, publish

RESULTS = Path(__file__).resolve().parent / "results"

SLOW = {"devices": 4, "microbatches": 10, "objective": "stage_span",
        "costs": {"forward": [1.0, 2.0, 1.5, 1.0], "backward_input": [2.0, 1.0, 1.0, 3.0],
                  "backward_weight": [1.0, 1.0, 2.0, 1.0]},
        "memory": {"limit": 3}}


def session_alive(sid: int) -> bool:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            return True
    return False


def trial(how: str, folder: Path) -> tuple[float, int]:
    sweep = folder / "sweep.jsonl"
    lines = [{"name": "quick", "problem": {"devices": 2, "microbatches": 2}}]
    lines += [{"name": f"slow{i}", "problem": {**SLOW, "microbatches": 10 + i}} for i in range(4)]
    sweep.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = folder / "out"
    proc = subprocess.Popen([sys.executable, "-m", "pipesched", "batch", str(sweep), "-o", str(out), "--jobs", "2",
                             "--method", "ilp", "--time-limit", "120"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        while not (out / "quick.json").exists():
            time.sleep(0.05)
        time.sleep(2.0)  # the next solves are building and running their models
        t0 = time.perf_counter()
        if how == "SIGINT to the group":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
        while session_alive(proc.pid):
            time.sleep(0.01)
        return time.perf_counter() - t0, code
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    rows = ["| signal | trial | exit code | stop time (s) |", "|---|---|---|---|"]
    worst = 0.0
    for how in ("SIGINT to the group", "SIGTERM to batch"):
        for n in range(args.trials):
            with tempfile.TemporaryDirectory() as tmp:
                seconds, code = trial(how, Path(tmp))
            worst = max(worst, seconds)
            rows.append(f"| {how} | {n + 1} | {code} | {seconds:.2f} |")
    text = "\n".join(["# pipesched batch: time from the signal to no process left", "",
                      f"Command: `{command_line('batch_stop.py', None)}`", "", *rows, "",
                      f"Worst stop time: **{worst:.2f} s** (target: 2 s)."])
    publish(text + "\n", RESULTS / "batch_stop.md")


if __name__ == "__main__":
    main()

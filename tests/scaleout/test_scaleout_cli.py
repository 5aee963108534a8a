"""Bad input to the scale-out commands: one line naming the flag and the reason, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipesched.api.scaleout.lowprio import SOLVE_SLICE_NS
from pipesched.cli import main


@pytest.mark.parametrize(("argv", "says"), [
    (["worker", "--db", "sqlite:///x.db"], "--db sqlite:///x.db: the worker needs the shared PostgreSQL store"),
    (["worker", "--db", "postgresql://u@127.0.0.1/db", "--concurrency", "0"], "--concurrency must be >= 1 (got 0)"),
    (["worker", "--db", "postgresql://u@127.0.0.1/db", "--max-attempts", "0"], "--max-attempts must be >= 1"),
    (["worker", "--db", "postgresql://u@127.0.0.1/db", "--nice", "20"], "--nice must be from 0 (as the worker) to 19 (lowest), or 'idle'"),
    (["worker", "--db", "postgresql://u@127.0.0.1/db", "--retention", "5"], "--retention must be >= 60 seconds"),
    (["serve", "--db", "sqlite:///x.db", "--workers", "external"], "--workers external: needs a postgresql:// --db"),
    (["batch", ".", "-o", "out", "--address", "127.0.0.1:6379"], "--address is for --engine ray (got --engine local)"),
])
def test_bad_scaleout_flags_are_one_line_and_exit_2(argv: list[str], says: str, tmp_path, monkeypatch,  # noqa: ANN001
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pipesched: error: ") and says in err and "\n" not in err, err


@pytest.mark.parametrize(("text", "nice", "idle"), [("0", 0, False), ("7", 7, False), ("19", 19, False),
                                                    ("idle", 0, True)])
def test_a_lowered_solve_process_runs_at_the_asked_priority(text: str, nice: int, idle: bool) -> None:
    import multiprocessing as mp
    import os

    from pipesched.api.scaleout.lowprio import parse_nice

    def child(conn) -> None:  # noqa: ANN001
        from pipesched.api.scaleout.lowprio import lower_priority

        lower_priority(parse_nice(text))
        slices = [line.split(":")[1].strip() for line in Path("/proc/self/sched").read_text().splitlines()
                  if line.startswith("se.slice")]
        conn.send((os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0) == os.SCHED_IDLE, slices))

    receiver, sender = mp.get_context("fork").Pipe(duplex=False)
    proc = mp.get_context("fork").Process(target=child, args=(sender,))
    proc.start()
    got = receiver.recv() if receiver.poll(30) else None
    proc.join(10)
    base = os.getpriority(os.PRIO_PROCESS, 0)
    assert got is not None and got[:2] == (base + nice, idle)
    if nice:  # a lowered solve asks for the longest slice (lowprio.long_slice); this kernel shows it
        assert got[2] == [str(SOLVE_SLICE_NS)]

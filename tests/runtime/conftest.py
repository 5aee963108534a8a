"""Runtime tests: gloo on 127.0.0.1 (free ports), one thread per process, every spawn time-bounded.

Spawning processes that import torch costs seconds each, so each spawned group replays many
schedules; ``run_ranks`` kills any process still running at its timeout. On top of that every
test here (setup included) is bounded by an alarm, so nothing in this folder can hang the suite.

Without torch these tests skip, except with ``PIPESCHED_REQUIRE_TORCH=1`` (as ``.ci/run`` sets):
there a missing or broken torch fails the run, so CI cannot pass by skipping the runtime.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

if os.environ.get("PIPESCHED_REQUIRE_TORCH") == "1":
    try:
        import torch
    except ImportError as e:
        raise pytest.UsageError(f"PIPESCHED_REQUIRE_TORCH=1 but torch cannot be imported: {e}") from e
else:
    torch = pytest.importorskip("torch")
torch.set_num_threads(1)

#: Upper bound for one test including its fixtures' setup and teardown.
TEST_TIMEOUT_S = int(os.environ.get("PIPESCHED_RUNTIME_TEST_TIMEOUT", "150"))

_HERE = Path(__file__).parent


def _on_alarm(signum: int, frame: object) -> None:
    raise TimeoutError(f"runtime test still running after {TEST_TIMEOUT_S} s")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if _HERE not in Path(str(item.path)).parents:
        yield
        return
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(TEST_TIMEOUT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)

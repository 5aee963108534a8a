"""Puts ``tests/`` on ``sys.path`` (pytest does so for a conftest's folder), so every test folder can
``from requires import require`` (tests/requires.py: optional packages, skipped locally, required in CI).

Tests marked ``exclusive`` run alone: the suite runs on two xdist workers (pyproject's addopts), and a
few tests measure what the other worker's load would change (a solver process at SCHED_IDLE priority
that a busy neighbour starves, a wall-clock net that fires under load). Every test holds a shared lock
on one file for its run; an exclusive one holds it exclusively, so it waits until the other worker is
between tests and the other worker waits for it.
"""

from __future__ import annotations

import fcntl
import os
import signal
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

#: Test folders whose every test is exclusive: the scale-out tests' solves run at SCHED_IDLE priority
#: (a busy neighbour starves them past their overrun limit) and start Ray clusters and worker fleets.
EXCLUSIVE_FOLDERS = ("scaleout",)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "exclusive: run while no other xdist worker runs a test")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if any(part in EXCLUSIVE_FOLDERS for part in Path(str(item.path)).parts):
            item.add_marker(pytest.mark.exclusive)


def _lock_path() -> Path:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "serial")
    return Path(tempfile.gettempdir()) / f"pipesched-tests-{run}.lock"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if os.environ.get("PYTEST_XDIST_WORKER") is None:  # one process: nothing runs beside it
        yield
        return
    t0 = time.time()
    with open(_lock_path(), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX if item.get_closest_marker("exclusive") else fcntl.LOCK_SH)
        t1 = time.time()
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
            _record(item, t0, t1)


def _record(item: pytest.Item, asked: float, locked: float) -> None:
    """With ``PIPESCHED_TEST_TIMELINE=FILE``, one line per test: worker, when it asked for the lock, got
    it and ended (epoch seconds), its id: where the suite's time goes, lock waits included
    (docs/development.md)."""
    path = os.environ.get("PIPESCHED_TEST_TIMELINE")
    if path:
        with open(path, "a") as out:
            out.write(f"{os.environ.get('PYTEST_XDIST_WORKER')}\t{asked:.3f}\t{locked:.3f}\t{time.time():.3f}\t{item.nodeid}\n")


_SIGINT_AT_START = signal.getsignal(signal.SIGINT)


def pytest_runtest_teardown(item: pytest.Item) -> None:
    """A test that leaves SIGINT changed in this process changes what every later command it starts
    inherits (an ignored SIGINT stays ignored in a child): put it back, and say which test did it."""
    now = signal.getsignal(signal.SIGINT)
    if now is not _SIGINT_AT_START:
        signal.signal(signal.SIGINT, _SIGINT_AT_START)
        warnings.warn(f"{item.nodeid} left SIGINT set to {now!r}; restored", stacklevel=1)

"""Solve a chunk of sweep items in one killable process, each item still under its own deadline.

Why: a greedy solve of a sweep's small problem takes ~20 ms of CPU, and forking a fresh solver
process for it costs about as much again (measured: 42 vs 24 ms of CPU a problem on this machine).
A remote engine that ships problems in chunks (:mod:`pipesched.api.batch.ray`) runs a whole chunk
in one process forked from the warm forkserver, so the fork is paid once a chunk.

What stays as in :class:`~pipesched.api.solving.runner.ProcessRunner`: each item has the hard
deadline ``time_limit_s + kill_grace_s``, counted from the answer before it; an item that overruns
it is killed with the process (``killed``) and one that takes the process down is ``crashed``;
either way that item alone fails and the rest of the chunk goes on in a fresh process. The
process itself runs the same bodies as a one-item process (``run_solve``, ``run_plan``).
"""

from __future__ import annotations

import time
from multiprocessing.connection import Connection
from typing import Any

from ..solving.plan_worker import run_plan
from ..solving.runner import ForkedProcesses
from ..solving.worker import run_solve

#: One item: ``("solve", (problem_json, method, time_limit_s, hint_json, workers))`` or
#: ``("plan", (model_json, cluster_json, method, time_limit_s, module_names))``.
Unit = tuple[str, tuple[Any, ...]]
#: ``(outcome, payload, seconds)``: what the item's process answered and how long it took.
Result = tuple[str, str, float]

_BODIES = {"solve": run_solve, "plan": run_plan}


class _Shared:
    """The chunk's pipe as each one-item body sees it: ``send`` goes through, ``close`` waits for
    the end of the chunk (every body closes its connection when it has answered)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def send(self, obj: Any) -> None:
        self.conn.send(obj)

    def close(self) -> None:
        return None


def run_units(conn: Connection, units: list[Unit]) -> None:
    """The chunk process: answer each unit in order, one message per unit."""
    shared = _Shared(conn)
    try:
        for kind, args in units:
            _BODIES[kind](shared, *args)  # type: ignore[operator]
    finally:
        conn.close()


class ChunkRunner(ForkedProcesses):
    """Runs chunks of units in processes forked from a warm forkserver; ``kill_all`` stops them."""

    def run(self, units: list[Unit], time_limits: list[float]) -> list[Result]:
        """One result per unit, in order; a killed or crashed unit fails alone."""
        results: list[Result] = []
        while len(results) < len(units):
            results += self._one_process(units[len(results):], time_limits[len(results):])
        return results

    def _one_process(self, units: list[Unit], time_limits: list[float]) -> list[Result]:
        """Answers from one process, up to and including the first unit that killed it."""
        receiver, sender, proc = self._spawn(run_units, (units,))
        out: list[Result] = []
        try:
            proc.start()
            sender.close()
            for time_limit_s in time_limits:
                t0 = time.perf_counter()
                if not receiver.poll(time_limit_s + self.kill_grace_s):
                    out.append(("killed", self.overrun(time_limit_s), time.perf_counter() - t0))
                    break
                try:
                    outcome, payload = receiver.recv()
                except EOFError:
                    proc.join(1.0)
                    out.append(("crashed", f"the solver process died (exit code {proc.exitcode}) before answering",
                                time.perf_counter() - t0))
                    break
                out.append((outcome, payload, time.perf_counter() - t0))
            return out
        finally:
            self._reap(receiver, proc, 2.0 if len(out) == len(units) else 0.0)

"""Start one solve process and wait for its answer, or kill it at its deadline (service and batch).

Why a process per solve: see :mod:`pipesched.api.solving`.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import threading
from collections.abc import Callable
from typing import Any, Literal

from . import worker

Outcome = Literal["ok", "not_applicable", "error", "killed", "crashed"]


class ProcessRunner:
    """Runs one solve per process (forked from a warm forkserver) and kills it at its deadline."""

    def __init__(self, kill_grace_s: float, solver_workers: int = 1) -> None:
        self.kill_grace_s = kill_grace_s
        self.solver_workers = solver_workers
        self.ctx = mp.get_context("forkserver")
        self.ctx.set_forkserver_preload(["pipesched.api.solving.preload"])
        self._live: set[mp.process.BaseProcess] = set()
        self._lock = threading.Lock()

    def run(self, problem_json: str, method: str, time_limit_s: float, hint_json: str | None) -> tuple[Outcome, str]:
        """Blocking: ``(outcome, schedule JSON or error message)``. Call from a thread."""
        return self.call(worker.run_solve, (problem_json, method, time_limit_s, hint_json, self.solver_workers),
                         time_limit_s)

    def call(self, target: Callable[..., None], args: tuple[Any, ...], time_limit_s: float) -> tuple[Outcome, str]:
        """Blocking: run ``target(conn, *args)`` in a fresh process (it sends one ``(outcome, payload)``
        through ``conn``), killed at ``time_limit_s + kill_grace_s``. Plans use it too."""
        receiver, sender = self.ctx.Pipe(duplex=False)
        proc = self.ctx.Process(target=target, args=(sender, *args), daemon=True)
        with self._lock:
            self._live.add(proc)
        deadline = time_limit_s + self.kill_grace_s
        try:
            proc.start()
            sender.close()
            if receiver.poll(deadline):
                try:
                    outcome, payload = receiver.recv()
                except EOFError:
                    proc.join(1.0)
                    return "crashed", f"the solver process died (exit code {proc.exitcode}) before answering"
                return outcome, payload
            return "killed", (
                f"the solver overran its hard wall-clock limit of {deadline:g} s "
                f"(time_limit_s {time_limit_s:g} + grace {self.kill_grace_s:g}) and was killed"
            )
        finally:
            receiver.close()
            proc.join(2.0)
            if proc.is_alive():
                proc.kill()
                proc.join()
            with self._lock:
                self._live.discard(proc)

    def kill_all(self) -> None:
        with self._lock:
            procs = list(self._live)
        for proc in procs:
            with contextlib.suppress(Exception):
                proc.kill()

"""Start one solve process and wait for its answer, or kill it at its deadline (service and batch).

Why a process per solve: see :mod:`pipesched.api.solving`.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Literal

from . import worker

Outcome = Literal["ok", "not_applicable", "error", "killed", "crashed"]


def _group_leader(target: Callable[..., None], spawner: int, *args: Any) -> None:
    """Run ``target`` as the leader of a new process group, so that killing the group also kills what
    it started (PuLP's CBC is a child process), and end the group when ``spawner`` (the service,
    worker or batch that asked) is gone (:func:`~.worker.watch_spawner`). Killing the solve alone, then
    its children found in ``/proc``, left a CBC started in between running to its time limit."""
    os.setpgid(0, 0)
    worker.watch_spawner(spawner)
    target(*args)


def kill_group(proc: mp.process.BaseProcess) -> None:
    """SIGKILL ``proc`` and then its process group (everything it started). The process first: once
    a kill is pending it can fork no more (Linux restarts a fork that a signal interrupts), and its
    group outlives it while a member lives. Before ``proc`` made its group there is none (ESRCH)."""
    with contextlib.suppress(Exception):
        proc.kill()
    if proc.pid is not None:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)


class ForkedProcesses:
    """Solver processes forked from a warm forkserver, each tracked while it lives so ``kill_all``
    (shutdown) can stop them; shared by the one-solve runner and the batch's chunk runner."""

    def __init__(self, kill_grace_s: float) -> None:
        self.kill_grace_s = kill_grace_s
        self.ctx = mp.get_context("forkserver")
        self.ctx.set_forkserver_preload(["pipesched.api.solving.preload"])
        self._live: set[mp.process.BaseProcess] = set()
        self._lock = threading.Lock()

    def _spawn(self, target: Callable[..., None], args: tuple[Any, ...]
               ) -> tuple[Connection, Connection, mp.process.BaseProcess]:
        """A tracked, not yet started process running ``target(sender, *args)`` and the pipe's two ends."""
        receiver, sender = self.ctx.Pipe(duplex=False)
        proc = self.ctx.Process(target=_group_leader, args=(target, os.getpid(), sender, *args), daemon=True)
        with self._lock:
            self._live.add(proc)
        return receiver, sender, proc

    def _reap(self, receiver: Connection, proc: mp.process.BaseProcess, wait_s: float) -> None:
        """Close the pipe, give the process ``wait_s`` to exit, kill it otherwise, stop tracking it."""
        receiver.close()
        proc.join(wait_s)
        if proc.is_alive():
            kill_group(proc)
            proc.join()
        with self._lock:
            self._live.discard(proc)

    def overrun(self, time_limit_s: float) -> str:
        """Why a solve that did not answer by its hard limit was killed."""
        deadline = time_limit_s + self.kill_grace_s
        return (f"the solver overran its hard wall-clock limit of {deadline:g} s "
                f"(time_limit_s {time_limit_s:g} + grace {self.kill_grace_s:g}) and was killed")

    def kill_all(self) -> None:
        with self._lock:
            procs = list(self._live)
        for proc in procs:
            kill_group(proc)


class ProcessRunner(ForkedProcesses):
    """Runs one solve per process (forked from a warm forkserver) and kills it at its deadline."""

    def __init__(self, kill_grace_s: float, solver_workers: int = 1) -> None:
        super().__init__(kill_grace_s)
        self.solver_workers = solver_workers

    def run(self, problem_json: str, method: str, time_limit_s: float, hint_json: str | None) -> tuple[Outcome, str]:
        """Blocking: ``(outcome, schedule JSON or error message)``. Call from a thread."""
        return self.call(worker.run_solve, (problem_json, method, time_limit_s, hint_json, self.solver_workers),
                         time_limit_s)

    def call(self, target: Callable[..., None], args: tuple[Any, ...], time_limit_s: float) -> tuple[Outcome, str]:
        """Blocking: run ``target(conn, *args)`` in a fresh process (it sends one ``(outcome, payload)``
        through ``conn``), killed at ``time_limit_s + kill_grace_s``. Plans use it too."""
        receiver, sender, proc = self._spawn(target, args)
        try:
            proc.start()
            sender.close()
            if receiver.poll(time_limit_s + self.kill_grace_s):
                try:
                    outcome, payload = receiver.recv()
                except EOFError:
                    proc.join(1.0)
                    return "crashed", f"the solver process died (exit code {proc.exitcode}) before answering"
                return outcome, payload
            return "killed", self.overrun(time_limit_s)
        finally:
            self._reap(receiver, proc, 2.0)

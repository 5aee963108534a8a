"""What runs inside a solver process: one solve, its answer sent back through a pipe; and the rule
every solver process follows: it dies with the process that asked for it.

Why a process per solve: see :mod:`pipesched.api.solving`.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection

from pipesched.solver import SolveOptions, methods, solve
from pipesched.solver.core.errors import NotApplicableError
from pipesched.solver.core.problem import Problem
from pipesched.solver.core.schedule import Schedule

#: How often the fallback watcher (no ``pidfd_open``) looks whether the spawner still lives.
_POLL_S = 0.2


def warm() -> None:
    """Import every method module (OR-Tools, PuLP, ...) once, in the forkserver, so each fork starts warm."""
    methods()


def watch_spawner(pid: int) -> None:
    """End this process, and its process group when it leads one (what the solve started: CBC),
    as soon as process ``pid`` is gone, whatever killed it (``kill -9`` included).

    ``pid`` is the service (or worker, or batch) that asked for the solve, not this process's
    parent: the parent is the multiprocessing forkserver, which stays alive as long as any of its
    children holds its pipe, so watching it kept solves running for their whole time limit after
    the service was killed. Linux's ``pidfd_open`` wakes the watcher the moment ``pid`` exits."""
    threading.Thread(target=_exit_when_gone, args=(pid,), daemon=True, name="pipesched-watch").start()


def _exit_when_gone(pid: int) -> None:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:  # gone already
        _die()
    except (AttributeError, OSError):  # no pidfd (old kernel, not Linux): look every _POLL_S
        while _alive(pid):
            threading.Event().wait(_POLL_S)
    else:
        select.select([fd], [], [])  # readable once the process has exited
    _die()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _die() -> None:
    if os.getpgid(0) == os.getpid():
        os.killpg(0, signal.SIGKILL)
    os._exit(1)


def answer(conn: Connection, what: str, work: Callable[[], str],
           refused: tuple[type[Exception], ...] = (NotApplicableError,)) -> None:
    """Send ``("ok", work())``, ``("not_applicable", msg)`` for a ``refused`` error, or ``("error", msg)``
    for anything else (its traceback to the log: a solver bug must not take the service down)."""
    # Ctrl-C reaches the whole terminal process group; the parent decides when a solve stops (it
    # kills it), so the solve must not die on its own with a KeyboardInterrupt traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        conn.send(("ok", work()))
    except refused as e:
        conn.send(("not_applicable", str(e)))
    except Exception as e:
        logging.getLogger("pipesched.solve").exception("a %s failed", what)
        conn.send(("error", f"{type(e).__name__}: {e}"))
    finally:
        conn.close()


def run_solve(conn: Connection, problem_json: str, method: str, time_limit_s: float, hint_json: str | None,
              workers: int) -> None:
    """Solve and send ``("ok", schedule_json)``, ``("not_applicable", msg)`` or ``("error", msg)``."""
    def work() -> str:
        problem = Problem.model_validate_json(problem_json)
        hint = None
        if hint_json:
            hint = Schedule.model_validate_json(hint_json).model_copy(update={"problem": problem})
        return solve(problem, method, SolveOptions(time_limit_s=time_limit_s, hint=hint, workers=workers)
                     ).model_dump_json()

    answer(conn, f"{method} solve", work)

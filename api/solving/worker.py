"""What runs inside a solver process: one solve, its answer sent back through a pipe.

Why a process per solve: see :mod:`pipesched.api.solving`.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from multiprocessing.connection import Connection

from pipesched.solver import SolveOptions, methods, solve
from pipesched.solver.core.errors import NotApplicableError
from pipesched.solver.core.problem import Problem
from pipesched.solver.core.schedule import Schedule


def warm() -> None:
    """Import every method module (OR-Tools, PuLP, ...) once, in the forkserver, so each fork starts warm."""
    methods()


def _exit_with_parent(parent: int) -> None:
    """Stop solving when the process that forked us is gone (the service died or was killed), and
    take down what the solve started (CBC) when this process leads its own group (runner.py)."""
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            if os.getpgid(0) == os.getpid():
                os.killpg(0, signal.SIGKILL)
            os._exit(1)


def run_solve(conn: Connection, problem_json: str, method: str, time_limit_s: float, hint_json: str | None,
              workers: int) -> None:
    """Solve and send ``("ok", schedule_json)``, ``("not_applicable", msg)`` or ``("error", msg)``."""
    # Ctrl-C reaches the whole terminal process group; the parent decides when a solve stops (it
    # kills it), so the solve must not die on its own with a KeyboardInterrupt traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    try:
        problem = Problem.model_validate_json(problem_json)
        hint = None
        if hint_json:
            hint = Schedule.model_validate_json(hint_json).model_copy(update={"problem": problem})
        options = SolveOptions(time_limit_s=time_limit_s, hint=hint, workers=workers)
        schedule = solve(problem, method, options)
        conn.send(("ok", schedule.model_dump_json()))
    except NotApplicableError as e:
        conn.send(("not_applicable", str(e)))
    except Exception as e:  # a solver bug: report it (traceback to the log), the service stays up
        logging.getLogger("pipesched.solve").exception("a %s solve failed", method)
        conn.send(("error", f"{type(e).__name__}: {e}"))
    finally:
        conn.close()

"""Solve in a forked child process, so a crash inside a native solver cannot take the caller down.

Why: OR-Tools 9.14 and 9.15 can abort the whole process with heap corruption while CP-SAT searches
with several workers (google/or-tools#5048: a use-after-free in ``GenericLiteralWatcher::Untrail``;
seen here twice on relaxation models with 2 workers). The service and ``pipesched batch`` already
solve in child processes; ``pipesched solve`` solved in its own and would die with the library's
``malloc(): corrupted`` and no schedule. Here a child that dies without answering is solved once
more with one CP-SAT worker (the bug is in the multi-worker search); if that dies too, the caller
gets :class:`SolverCrashed` with the signal, not a core dump. Without ``fork`` (Windows) the solve
runs in this process as before.
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
import signal
import sys
from collections.abc import Callable
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from .core.method import SolveOptions
from .core.problem import Problem
from .core.schedule import Schedule

SolveFn = Callable[[Problem, str, SolveOptions], Schedule]
T = TypeVar("T")


class SolverCrashed(RuntimeError):
    """The solver process died (a signal or an exit) without an answer, also with one worker."""


def _child(conn: Connection, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    try:
        payload = ("ok", pickle.dumps(fn(*args, **kwargs)))
    except BaseException as e:  # the caller re-raises it: same errors as an in-process call
        try:
            payload = ("error", pickle.dumps(e))
        except Exception:  # an exception that does not pickle: its text
            payload = ("error", pickle.dumps(RuntimeError(f"{type(e).__name__}: {e}")))
    conn.send(payload)
    conn.close()


class _Died:
    """What :func:`_attempt` returns when the child died without answering."""

    def __init__(self, exitcode: int) -> None:
        self.exitcode = exitcode


def _attempt(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``fn(*args, **kwargs)`` from a forked child, or :class:`_Died` when it died without answering."""
    ctx = mp.get_context("fork")
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(sender, fn, args, kwargs))
    proc.start()
    sender.close()
    try:
        try:
            kind, value = receiver.recv()
        except EOFError:  # died before answering
            proc.join()
            if proc.exitcode == -signal.SIGINT:  # Ctrl-C reached the child (the terminal's group): the
                raise KeyboardInterrupt from None  # caller's interrupt, not a crash (CP-SAT resets SIGINT)
            return _Died(proc.exitcode if proc.exitcode is not None else -1)
        proc.join()
    except BaseException:  # Ctrl-C (the child had it too) or anything else: leave no child behind
        proc.kill()
        proc.join()
        raise
    if kind == "ok":
        return pickle.loads(value)
    raise pickle.loads(value)


def _how(exitcode: int) -> str:
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with code {exitcode}"


def call_isolated(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a forked child: a native crash raises :class:`SolverCrashed` here, and
    Ctrl-C stops the caller at once (in-process, CP-SAT catches SIGINT and only ends the current
    search, so a planner running many searches went on to a normal exit). ``pipesched plan`` uses it."""
    if "fork" not in mp.get_all_start_methods():
        return fn(*args, **kwargs)
    got = _attempt(fn, args, kwargs)
    if isinstance(got, _Died):
        raise SolverCrashed(f"the solver process {_how(got.exitcode)} without an answer")
    return got


def solve_isolated(problem: Problem, method: str, options: SolveOptions, solve_fn: SolveFn | None = None) -> Schedule:
    """``solve_fn(problem, method, options)`` (default: :func:`pipesched.solver.solve`) in a forked child;
    once more with ``workers=1`` if the child dies without answering; :class:`SolverCrashed` if that
    dies too. Errors the solve raises (bad input, not applicable) come back as themselves."""
    if solve_fn is None:
        from .registry import solve as solve_fn  # OR-Tools and PuLP load here, not on import
    if "fork" not in mp.get_all_start_methods():
        return solve_fn(problem, method, options)
    got = _attempt(solve_fn, (problem, method, options), {})
    if not isinstance(got, _Died):
        return got
    first = _how(got.exitcode)
    if options.workers > 1:
        print(f"pipesched: warning: the solver process {first} (OR-Tools' multi-worker search can crash: "
              "google/or-tools#5048); solving again with one worker", file=sys.stderr)
        got = _attempt(solve_fn, (problem, method, replace(options, workers=1)), {})
        if not isinstance(got, _Died):
            return got
    raise SolverCrashed(f"the solver process {_how(got.exitcode)} without an answer (first attempt: {first})")

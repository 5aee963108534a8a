"""Every scheduling method behind one signature: problem (+ options) in, validated schedule out.

Methods register themselves with :func:`method`; :func:`solve` is the single entry point the
CLI, the service, the client's local fallback and the runtime's checks call.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from .errors import NotApplicableError
from .problem import Problem
from .schedule import Schedule

#: Modules that define methods, in the order ``methods()`` lists them; imported by name on first use,
#: so the CLI starts fast and this low layer never imports the methods' layers above it.
_METHOD_MODULES = (
    "pipesched.solver.heuristics.classic.dualpipe",
    "pipesched.solver.heuristics.classic.dualpipe_v",
    "pipesched.solver.heuristics.classic.gpipe",
    "pipesched.solver.heuristics.greedy",
    "pipesched.solver.heuristics.classic.interleaved",
    "pipesched.solver.heuristics.classic.interleaved_zb",
    "pipesched.solver.heuristics.classic.looped_bfs",
    "pipesched.solver.heuristics.classic.one_f_one_b",
    "pipesched.solver.heuristics.classic.zb_h",
    "pipesched.solver.heuristics.classic.zb_v",
    "pipesched.solver.heuristics.v_greedy",
    "pipesched.solver.heuristics.v_memory",
    "pipesched.solver.exact.ilp.method",
    "pipesched.solver.exact.cpsat.method",
    "pipesched.solver.portfolio.auto",
)


@dataclass(frozen=True)
class SolveOptions:
    """Knobs shared by all methods; heuristics ignore what they do not need."""

    time_limit_s: float = 10.0
    hint: Schedule | None = None  # a known schedule to warm-start from (e.g. a cached entry)
    workers: int = 2  # solver threads; results must not depend on it (determinism)
    backend: str | None = None  # method-specific engine, e.g. the ILP's "cbc" (default) or "highs"


Applies = Callable[[Problem], str | None]
SolveFn = Callable[[Problem, SolveOptions], Schedule]


@dataclass(frozen=True)
class Method:
    name: str
    summary: str  # one line: what it is and when it applies
    run: SolveFn
    applies: Applies  # None when the method can schedule the problem, else the reason it cannot


_REGISTRY: dict[str, Method] = {}
_loaded = False


def method(name: str, summary: str, applies: Applies | None = None) -> Callable[[SolveFn], SolveFn]:
    """Decorator registering ``fn`` as method ``name``."""

    def register(fn: SolveFn) -> SolveFn:
        _REGISTRY[name] = Method(name, summary, fn, applies or (lambda _p: None))
        return fn

    return register


def _load() -> None:
    global _loaded
    if not _loaded:
        for module in _METHOD_MODULES:
            importlib.import_module(module)
        _loaded = True


def methods() -> list[Method]:
    _load()
    return list(_REGISTRY.values())


def get_method(name: str) -> Method:
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise NotApplicableError(f"unknown method {name!r}; choose one of: {known}") from None


def solve(problem: Problem, method_name: str = "auto", options: SolveOptions | None = None) -> Schedule:
    """Schedule ``problem`` with ``method_name``; the schedule is validated and carries its solve time."""
    m = get_method(method_name)
    reason = m.applies(problem)
    if reason:
        raise NotApplicableError(f"method {method_name!r} does not apply: {reason}")
    t0 = time.perf_counter()
    schedule = m.run(problem, options or SolveOptions())
    if not schedule.solve_time_s:
        schedule = schedule.model_copy(update={"solve_time_s": round(time.perf_counter() - t0, 6)})
    return schedule

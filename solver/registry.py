"""Every scheduling method behind one signature, and the single entry point that runs one.

The methods are imported here by name (no discovery): the heuristics' tuple, the two exact models and
the portfolio. :func:`solve` is what the CLI, the service, the client's local fallback and the
runtime's checks call. ``pipesched.solver`` loads this module on first use (its ``solve``,
``methods`` and ``get_method``), because the exact models import OR-Tools and PuLP (about a second),
which ``pipesched --help`` and the wire models do not need.
"""

from __future__ import annotations

import time

from .core.errors import NotApplicableError
from .core.method import Method, SolveOptions
from .core.problem import Problem
from .core.schedule import Schedule
from .exact.cpsat.method import CPSAT
from .exact.ilp.method import ILP
from .heuristics.catalog import HEURISTICS
from .portfolio.auto import AUTO

#: Every method, in the order ``pipesched methods`` lists them.
REGISTRY: dict[str, Method] = {m.name: m for m in (*HEURISTICS, ILP, CPSAT, AUTO)}
if len(REGISTRY) != len(HEURISTICS) + 3:  # pragma: no cover - a duplicate name is a programming error
    raise RuntimeError("two method records share a name")


def methods() -> list[Method]:
    return list(REGISTRY.values())


def get_method(name: str) -> Method:
    try:
        return REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(REGISTRY))
        raise NotApplicableError(f"unknown method {name!r}; choose one of: {known}") from None


def solve(problem: Problem, method_name: str = "auto", options: SolveOptions | None = None) -> Schedule:
    """Schedule ``problem`` with ``method_name``; the schedule is validated and carries its solve time.

    A method that cannot schedule the problem's shape, or does not model one of its features, refuses
    it (:class:`NotApplicableError` naming the field) instead of answering another problem."""
    m = get_method(method_name)
    reason = m.applies(problem)
    if reason:
        raise NotApplicableError(f"method {method_name!r} does not apply: {reason}")
    t0 = time.perf_counter()
    schedule = m.run(problem, options or SolveOptions())
    if not schedule.solve_time_s:
        schedule = schedule.model_copy(update={"solve_time_s": round(time.perf_counter() - t0, 6)})
    return schedule

"""One solve's time: the :class:`Budget` every phase is sized from, and what the wall clock cut.

Why two clocks: every decision of what to run is sized from the *nominal* time limit and what earlier
phases were charged against it, with measured per-op costs (:mod:`pipesched.solver.budget`), never from
the clock, so the same problem and limit give the same answer on any machine. The wall clock is only a
net, for an overloaded machine: a phase it stops is recorded (:func:`note_wall_cut`) and the answer says
so, because it may then differ on a faster or less loaded machine.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar


@dataclass
class Budget:
    """The nominal ``limit`` (seconds), what was charged against it (``spent``), the share of the
    searches' deterministic time the phases before them left (``search_share``), and the wall-clock
    ``deadline`` that is only a net. ``unplanned``: idle-machine seconds recorded by phases that plan with a
    share or with what is left without charging it (re-timing, local search, the full search), after
    they ran; :func:`pipesched.solver.budget.limit.idle_seconds` reads it with ``spent``."""

    limit: float
    deadline: float = math.inf
    spent: float = 0.0
    search_share: float = 1.0
    unplanned: float = 0.0

    def record(self, seconds: float) -> None:
        """An uncharged phase's idle-machine seconds (no later phase plans with them)."""
        self.unplanned += seconds

    @property
    def rest(self) -> float:
        """Nominal seconds not yet charged."""
        return max(0.0, self.limit - self.spent)

    def charge(self, seconds: float) -> None:
        self.spent += seconds

    def charge_at_least(self, seconds: float) -> None:
        """A phase group that reserved ``seconds`` is charged that much even when it used less."""
        self.spent = max(self.spent, seconds)

    def claim(self, share: float) -> float:
        """Charge ``share`` of what is left to the phase asking and return it: the phases after it plan
        with the rest, and the searches' deterministic time shrinks by the same share."""
        seconds = share * self.rest
        self.spent += seconds
        self.search_share *= 1.0 - share
        return seconds

    def wall_left(self) -> float:
        """Wall seconds to the deadline (a net: only bounds a phase's wall time, never decides it)."""
        return self.deadline - time.perf_counter()

    def wall_fits(self, seconds: float, phase: str | None = None) -> bool:
        """Whether ``seconds`` of work would end before the deadline; when not and ``phase`` is named,
        the cut is recorded."""
        if time.perf_counter() + seconds <= self.deadline:
            return True
        if phase is not None:
            note_wall_cut(phase)
        return False


_CUTS: ContextVar[list[str] | None] = ContextVar("pipesched_wall_cuts", default=None)
_F = TypeVar("_F", bound=Callable)


def note_wall_cut(phase: str) -> None:
    """Record that the wall-clock net, not the deterministic budget, ended ``phase`` of this solve
    (its answer may then differ on a faster or less loaded machine). A no-op outside :func:`records_wall_cuts`."""
    cuts = _CUTS.get()
    if cuts is not None and phase not in cuts:
        cuts.append(phase)


def wall_cuts() -> list[str]:
    """The phases the wall clock cut so far in this solve, in the order they were cut."""
    return list(_CUTS.get() or ())


def records_wall_cuts(fn: _F) -> _F:
    """Decorator for a method's entry point: phases it runs record their wall-clock cuts (a nested
    method shares its caller's record)."""
    @functools.wraps(fn)
    def run(*args: object, **kwargs: object) -> object:
        if _CUTS.get() is not None:
            return fn(*args, **kwargs)
        token = _CUTS.set([])
        try:
            return fn(*args, **kwargs)
        finally:
            _CUTS.reset(token)
    return run  # type: ignore[return-value]

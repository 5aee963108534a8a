"""A portfolio as an ordered list of phases over one shared search state, under one :class:`Budget`.

Why: ``auto`` and ``cpsat`` both run heuristics, re-timing, a local search, bounds and exact searches,
each sized from the nominal time limit. Written as one function each, the budget was threaded through
twenty local variables and the portfolio knew every heuristic's internals. Here every heuristic, bound
and exact search is a :class:`Phase` that says whether it applies, what it costs and what it may use,
and runs within that; a portfolio is a list of them (:func:`run_phases`), and the :class:`Budget` is the
one place that knows what was charged and when the wall clock would cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..budget import RETIMED_ORDERS, SHARED_SLOWDOWN, Budget, retime_cost
from ..core.instance import Instance
from ..core.method import SolveOptions
from ..core.problem import Problem
from ..core.tolerance import slack
from ..timing.retime import Incumbent, retime
from ..timing.simulate import DeadlockError

Named = tuple[str, Incumbent]


@dataclass
class Search:
    """What the phases of one solve share: the problem, its budget, the orders found so far (the best
    :data:`RETIMED_ORDERS` of them), the incumbent and the best lower bound."""

    problem: Problem
    inst: Instance
    options: SolveOptions
    budget: Budget
    bound: float
    t0: float = 0.0  # when the solve started (perf_counter), for wall nets given as shares of the limit
    stop: float = float("inf")  # the heuristics' wall net (the budget's deadline is the method's)
    found: list[Named] = field(default_factory=list)
    incumbent: Incumbent | None = None
    proven: bool = False
    closed: bool = False  # a heuristic met the bound: the heuristics that would follow are skipped
    notes: list[str] = field(default_factory=list)  # what the answer's summary should say (a phase's own words)

    @property
    def limit(self) -> float:
        return self.budget.limit

    def keep(self, found: Sequence[Named]) -> None:
        """Add named orders, keeping the best few (ties keep the order found): holding every candidate
        of a 98k-op problem cost hundreds of MB (:data:`~pipesched.solver.budget.RETIMED_ORDERS`)."""
        self.found = best_of([*self.found, *found])

    def meets_bound(self, objective: float) -> bool:
        return objective - self.bound <= slack(self.bound)

    def settle(self, incumbent: Incumbent, proven: bool | None = None, bound: float | None = None) -> None:
        """A phase's result: the incumbent, a bound (never lowered) and the proof: a search's own verdict
        when it gives one (``proven``), else whether the incumbent meets the bound."""
        self.incumbent = incumbent
        if bound is not None:
            self.bound = max(self.bound, bound)
        self.proven = proven if proven is not None else incumbent.objective - self.bound <= slack(incumbent.objective)


def best_of(found: Sequence[Named]) -> list[Named]:
    return sorted(found, key=lambda nc: nc[1].objective)[:RETIMED_ORDERS]


class Phase(Protocol):
    """One step of a portfolio: ``applies`` (the problem's shape and the search's state: a phase that
    starts from the incumbent applies only once there is one), ``estimate``
    (nominal seconds the phase needs at least), ``allowance`` (nominal seconds it may use); the driver
    runs it when the estimate fits the allowance, and (``wall_net``) when it would end before the deadline."""

    name: str
    wall_net: bool

    def applies(self, s: Search) -> bool: ...

    def estimate(self, s: Search) -> float: ...

    def allowance(self, s: Search) -> float: ...

    def run(self, s: Search) -> None: ...


def run_phases(phases: Sequence[Phase], s: Search) -> None:
    """Each phase that applies and fits, in order (a phase a wall-clock net stops is recorded)."""
    for phase in phases:
        if not phase.applies(s) or phase.estimate(s) > phase.allowance(s):
            continue
        if phase.wall_net and not s.budget.wall_fits(phase.estimate(s), phase.name):
            continue
        phase.run(s)


@dataclass(frozen=True)
class RetimePhase:
    """The incumbent: the best orders found, the first few re-timed optimally for their order (as many as
    the estimated re-timing cost fits in ``share`` of the nominal limit; share 0: the best as found)."""

    share: float
    name: str = "optimal re-timing"
    wall_net: bool = False  # per order, below

    def applies(self, s: Search) -> bool:
        return bool(s.found)

    def estimate(self, s: Search) -> float:
        return 0.0

    def allowance(self, s: Search) -> float:
        return self.share * s.limit

    def run(self, s: Search) -> None:
        cands = [inc for _, inc in best_of(s.found)]
        cost = retime_cost(s.inst)
        timed = []
        for k, inc in enumerate(cands):
            if (k + 1) * cost > self.allowance(s) or not s.budget.wall_fits(cost, self.name):
                break
            try:
                timed.append(retime(s.inst, inc.order))
            except DeadlockError:
                timed.append(inc)
        s.budget.record(len(timed) * cost / SHARED_SLOWDOWN)
        s.settle(min(timed + cands, key=lambda c: c.objective))

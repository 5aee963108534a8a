"""CP-SAT's phases of a portfolio (:mod:`pipesched.solver.heuristics.search`): the relaxation bound, a
short sequential search for small problems, and the search on the full model from the incumbent.

Each is sized from the nominal limit: its deterministic time is ``limit * DTIME_PER_SECOND`` times its
share (``SEARCH_DTIME_SHARE`` of what the phases before it left, :attr:`Budget.search_share`); the wall
clock only bounds it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...budget import (
    BOUND_SHARE,
    CPSAT_OVERSHOOT_S,
    DTIME_PER_SECOND,
    FULL_MODEL_OPS,
    PER_OP,
    RELAX_MIN_S,
    SEARCH_DTIME_SHARE,
    SINGLE_MAX_S,
    SMALL_OPS,
    search_cost,
)
from ...heuristics.search import Search
from .formulation import needs_memory_resource
from .relaxations import relaxation_bound
from .run import solve_model
from .scaling import Scaling


@dataclass(frozen=True)
class RelaxationPhase:
    """A stronger bound from single-device relaxations (:mod:`.relaxations`) while the gap is open, on
    problems above ``SMALL_OPS`` (below, the full model proves as much) and up to ``FULL_MODEL_OPS``
    (above, no CP-SAT model runs: at 24.6k ops the relaxations took 16 s of a 60 s limit and the solve to
    518 MB, past the documented memory bound, for no better bound): ``BOUND_SHARE`` of what is left,
    when that is at least ``RELAX_MIN_S`` (a shorter run only ever ends on the wall clock)."""

    name: str = "relaxation bound"
    wall_net: bool = False  # checks the wall against its set-up cost alone, below

    def applies(self, s: Search) -> bool:
        return s.incumbent is not None and not s.proven and SMALL_OPS < s.inst.num_ops <= FULL_MODEL_OPS

    def setup(self, s: Search) -> float:
        return PER_OP.relax * s.inst.num_ops + 2 * CPSAT_OVERSHOOT_S  # two devices

    def estimate(self, s: Search) -> float:
        return max(self.setup(s), RELAX_MIN_S)

    def allowance(self, s: Search) -> float:
        return BOUND_SHARE * s.budget.rest

    def run(self, s: Search) -> None:
        assert s.incumbent is not None
        if s.budget.wall_left() <= self.setup(s):
            return
        s.budget.claim(BOUND_SHARE)
        seconds = s.budget.wall_left() * BOUND_SHARE - 2 * CPSAT_OVERSHOOT_S  # wall net, after the overshoot
        bound = relaxation_bound(s.inst, seconds, upper=s.incumbent.objective, hint=s.incumbent.start,
                                 workers=s.options.workers, dtime=s.limit * DTIME_PER_SECOND * BOUND_SHARE)
        s.settle(s.incumbent, bound=bound)


@dataclass(frozen=True)
class SequentialSearchPhase:
    """Small problems without a memory cumulative first get up to ``SINGLE_MAX_S`` of CP-SAT's sequential
    search (one worker): on memory-tight unit-cost cases it proves in about 1 s what the portfolio of
    workers leaves open; the full search gets what is left."""

    name: str = "CP-SAT sequential search"
    wall_net: bool = True

    def applies(self, s: Search) -> bool:
        return (s.incumbent is not None and not s.proven and s.inst.num_ops <= SMALL_OPS
                and not needs_memory_resource(s.inst, Scaling.of(s.inst)))

    def estimate(self, s: Search) -> float:
        return search_cost(s.inst)

    def allowance(self, s: Search) -> float:
        return s.budget.rest

    def run(self, s: Search) -> None:
        assert s.incumbent is not None
        single = min(s.budget.rest, SINGLE_MAX_S)
        s.budget.charge(single)
        res = solve_model(s.inst, s.incumbent, single, 1, known_bound=s.bound, deadline=s.budget.deadline,
                          nominal=single, dtime=DTIME_PER_SECOND * single)
        s.settle(res.incumbent, res.proven_optimal, res.bound or 0.0)


@dataclass(frozen=True)
class FullSearchPhase:
    """CP-SAT on the full model from the incumbent, up to ``FULL_MODEL_OPS`` ops (above, one search task
    overruns any limit without improving). ``share`` None: it plans with what the budget has left and
    must fit in it (``auto``); a share: it plans with that share of the limit and only the wall clock
    decides whether it starts (method ``cpsat``). ``known_bound``: the search's ``Z >=`` cut is the best
    bound so far, else the combinatorial bound."""

    share: float | None = None
    known_bound: bool = True
    name: str = "CP-SAT search"
    wall_net: bool = True

    def applies(self, s: Search) -> bool:
        return s.incumbent is not None and not s.proven and s.inst.num_ops <= FULL_MODEL_OPS

    def estimate(self, s: Search) -> float:
        return search_cost(s.inst)

    def allowance(self, s: Search) -> float:
        return s.budget.rest if self.share is None else float("inf")

    def run(self, s: Search) -> None:
        assert s.incumbent is not None
        budget = s.budget
        planned = budget.rest if self.share is None else self.share * s.limit
        res = solve_model(s.inst, s.incumbent, budget.wall_left(), s.options.workers,
                          known_bound=s.bound if self.known_bound else None, deadline=budget.deadline,
                          nominal=planned, dtime=s.limit * DTIME_PER_SECOND * SEARCH_DTIME_SHARE * budget.search_share)
        budget.record(res.counted)
        s.settle(res.incumbent, res.proven_optimal, res.bound or 0.0)

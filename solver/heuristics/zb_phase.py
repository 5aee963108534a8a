"""The zero-bubble authors' two constructions (:mod:`.zb_auto`, :mod:`.zbv_greedy`) as one phase of ``auto``.

Why a phase of their own rather than two more recipes: above ``FULL_MODEL_OPS`` the recipes phase runs a
search heuristic only while it fits what the grid left of the heuristics' share, and at 10 s on the
tuning set's p = 32 V cases (12k-25k ops) that skipped the ZB-V generator, leaving ``auto`` 2.3-2.5%
worse than the authors' own generator (``python benchmarks/zb_reference_table.py``). Like the V memory
orders, they run at every size on their own budget, charged their measured cost, unless the estimate
would end past the method's deadline above ``FULL_MODEL_OPS`` (then the clock is named as the cut), so
``auto`` is never worse than the authors' heuristics. It runs first, before the zero-bubble grid: placed
after the grid, at a load average of 4-5 the grid's 6.4 s of wall on the 24.6k-op V case left it no room
before the deadline, and above ``FULL_MODEL_OPS`` the V generator runs its reduced set
(:attr:`~pipesched.solver.budget.PerOpCosts.zbv_large`). When its best order meets the bound, the phases after it are
skipped, as after the grid.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..budget import (
    FULL_MODEL_OPS,
    PER_OP,
    RETIMED_ORDERS,
)
from .search import Search
from .zb_auto import ZB_AUTO, zb_auto_candidates
from .zbv_greedy import ZBV_GENERATOR, zbv_candidates

#: The methods whose orders this phase holds (the recipes phase skips them).
NAMES = (ZB_AUTO.name, ZBV_GENERATOR.name)


@dataclass(frozen=True)
class ZBConstructionsPhase:
    name: str = "zero-bubble constructions"
    wall_net: bool = False  # only above FULL_MODEL_OPS (run)

    def applies(self, s: Search) -> bool:
        return not s.closed and (ZB_AUTO.applies(s.problem) is None or ZBV_GENERATOR.applies(s.problem) is None)

    def estimate(self, s: Search) -> float:
        if ZB_AUTO.applies(s.problem) is None:
            return PER_OP.zb_auto * s.inst.num_ops
        return (PER_OP.zbv if self._full(s) else PER_OP.zbv_large) * s.inst.num_ops

    @staticmethod
    def _full(s: Search) -> bool:
        """The ZB-V generator's full set of runs, or above ``FULL_MODEL_OPS`` its reduced set."""
        return s.inst.num_ops <= FULL_MODEL_OPS

    def allowance(self, s: Search) -> float:
        return float("inf")  # their own budget: auto is never worse than the authors' heuristics

    def run(self, s: Search) -> None:
        cost = self.estimate(s)
        if s.inst.num_ops > FULL_MODEL_OPS and not s.budget.wall_fits(cost, self.name):
            return
        if ZB_AUTO.applies(s.problem) is None:
            found = [(f"{ZB_AUTO.name}[{k}]", c) for k, c in enumerate(zb_auto_candidates(s.inst, RETIMED_ORDERS))]
        else:
            found = [(f"{ZBV_GENERATOR.name}[{k}]", c)
                     for k, c in enumerate(zbv_candidates(s.inst, RETIMED_ORDERS, full=self._full(s)))]
        s.keep(found)
        s.budget.charge(cost)
        if found and s.meets_bound(min(c.objective for _, c in found)):
            s.closed = True

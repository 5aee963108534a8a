"""``auto``'s heuristics: the zero-bubble grid, every recipe that applies, the interleaved and V memory
orders, and the hint, as phases (:mod:`pipesched.solver.heuristics.search`) each defined beside the
heuristic it runs, so this module knows none of their internals.

Why every heuristic runs whenever it can: ``auto`` must never be worse than a method it contains
(:class:`~pipesched.solver.heuristics.catalog.RecipesPhase` says how a tiny limit is shared). The
heuristics are charged at least ``MODELLED.heuristic_share`` of the nominal limit, so the exact phases plan with
what is really left. Every decision reads estimates and the nominal limit, never the clock, so the
answer repeats; the clock only skips a heuristic that would end past the method's deadline, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..budget import MODELLED
from ..heuristics.catalog import RecipesPhase
from ..heuristics.interleaved_memory import InterleavedPhase
from ..heuristics.search import Phase, Search, run_phases
from ..heuristics.sync_order import SyncOrderPhase
from ..heuristics.v_greedy import V_GREEDY
from ..heuristics.v_memory import V_MEMORY, VMemoryPhase
from ..heuristics.warm_start import GridPhase, HintPhase
from ..heuristics.zb_phase import NAMES as ZB_CONSTRUCTIONS
from ..heuristics.zb_phase import ZBConstructionsPhase

#: Heuristics whose orders another phase holds, so the recipes do not run them again: the grid holds
#: the V greedy's; the V tight-cap orders and the zero-bubble authors' constructions are phases of their
#: own, charged their measured cost.
COVERED = (V_GREEDY.name, V_MEMORY.name, *ZB_CONSTRUCTIONS)

#: In order: the first valid order (the grid's) is always kept, so a tiny limit still returns a schedule;
#: the zero-bubble constructions go first (their own wall check; zb_phase.py says why).
#: The grid leaves the searches among the recipes their estimates when that lets them run (GridPhase.room).
RECIPES = RecipesPhase(covered=COVERED)
HEURISTIC_PHASES: tuple[Phase, ...] = (ZBConstructionsPhase(), GridPhase(room=RECIPES.room_before), RECIPES,
                                       InterleavedPhase(), VMemoryPhase(), HintPhase(), SyncOrderPhase())


@dataclass(frozen=True)
class HeuristicsPhase:
    """Every heuristic phase, then the charge of at least ``MODELLED.heuristic_share`` of the limit."""

    phases: tuple[Phase, ...] = HEURISTIC_PHASES
    name: str = "heuristics"
    wall_net: bool = False

    def applies(self, s: Search) -> bool:
        return True

    def estimate(self, s: Search) -> float:
        return 0.0

    def allowance(self, s: Search) -> float:
        return MODELLED.heuristic_share * s.limit

    def run(self, s: Search) -> None:
        run_phases(self.phases, s)
        s.budget.charge_at_least(self.allowance(s))

"""Every heuristic method, imported by name here, and the one way to run the ones that apply.

Why a list and not a discovery: the layers above (the exact models' warm starts, the portfolio) need
the heuristics' schedules, and asking a registry at run time would hide that dependency from the
layering test and let a method ship unlisted. A new heuristic is added to :data:`HEURISTICS`; the
facade (:mod:`pipesched.solver.registry`) registers this tuple, and ``tests/test_layers.py`` fails
when a method record defined anywhere in ``solver/`` is not registered.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from ..budget import FULL_MODEL_OPS, MODELLED, heuristic_share, note_wall_cut
from ..core.errors import InvalidScheduleError, NotApplicableError
from ..core.method import Method, Role, SolveOptions
from ..core.problem import Problem
from ..core.schedule import Schedule
from ..timing.retime import Incumbent
from ..timing.simulate import DeadlockError
from .classic.dualpipe import DUALPIPE
from .classic.dualpipe_v import DUALPIPE_V
from .classic.gpipe import GPIPE
from .classic.interleaved import INTERLEAVED_1F1B
from .classic.interleaved_zb import INTERLEAVED_ROUNDS, INTERLEAVED_ZB
from .classic.looped_bfs import LOOPED_BFS
from .classic.one_f_one_b import ONE_F_ONE_B
from .classic.zb_h import ZB_H1, ZB_H2
from .classic.zb_v import ZB_V
from .greedy import GREEDY
from .search import Search
from .v_greedy import V_GREEDY
from .v_memory import V_MEMORY
from .zb_auto import ZB_AUTO
from .zbv_greedy import ZBV_GENERATOR

#: The heuristic methods, in the order ``pipesched methods`` lists them.
HEURISTICS: tuple[Method, ...] = (
    DUALPIPE, DUALPIPE_V, GPIPE, GREEDY, INTERLEAVED_1F1B, INTERLEAVED_ZB, INTERLEAVED_ROUNDS, LOOPED_BFS,
    ONE_F_ONE_B, ZB_H1, ZB_H2, ZB_V, V_GREEDY, V_MEMORY, ZB_AUTO, ZBV_GENERATOR,
)
#: What a heuristic raises on a problem it does not fit; it is then skipped.
SKIPPED = (NotApplicableError, InvalidScheduleError, DeadlockError, ValueError)
#: The roles whose schedules are warm starts and portfolio candidates.
ORDER_ROLES: tuple[Role, ...] = ("recipe", "search")
#: Rounding room when a search's estimate is checked against the share the grid left it exactly.
FLOAT_SLACK_S = 1e-9


def applicable(problem: Problem, roles: Iterable[Role] = ORDER_ROLES, exclude: Iterable[str] = ()) -> list[Method]:
    """The heuristics of ``roles`` that apply to ``problem``, by name (so every caller's order is
    deterministic), without those named in ``exclude`` (a phase that runs them its own way)."""
    wanted, skip = set(roles), set(exclude)
    return sorted((m for m in HEURISTICS if m.role in wanted and m.name not in skip and m.applies(problem) is None),
                  key=lambda m: m.name)


def heuristic_schedules(problem: Problem, options: SolveOptions, methods: Iterable[Method] | None = None,
                        afford: Callable[[Method], bool] = lambda _m: True) -> Iterator[tuple[str, Schedule]]:
    """The schedule of each of ``methods`` (default: every applicable heuristic) that ``afford`` lets
    run (asked before each), one worker each; one that does not fit the problem is skipped, and so is
    an answer without ops."""
    for m in applicable(problem) if methods is None else methods:
        if not afford(m):
            continue
        try:
            schedule = m.run(problem, SolveOptions(time_limit_s=options.time_limit_s, workers=1))
        except SKIPPED:
            continue
        if schedule.ops:
            yield m.name, schedule


@dataclass(frozen=True)
class RecipesPhase:
    """Every heuristic that applies and no other phase covers, each charged its record's
    :attr:`~pipesched.solver.core.method.Method.cost_per_op`.

    Why every one whenever they fit: ``auto`` must never be worse than a method it contains. When all of
    them together fit ``MODELLED.heuristic_share`` of the nominal limit they all run, whatever the grid took (the
    clock only skips one that would end past the method's deadline above ``FULL_MODEL_OPS``, and says
    so). Otherwise (very large problems or tiny limits) the searches (greedy) go first, cheapest first,
    while they fit the heuristic share: the grid, which grows with its time where a search does not,
    has left them room (:meth:`room_before`). The fixed recipes (one simulation each) then always run unless
    one would end past the method's deadline: skipping them by the estimate alone once left ``auto`` 27%
    worse than ``interleaved-zb`` at 12k ops, and charging them before the searches once cut greedy from
    a 14,400-op case whose best order it was (``auto`` +54% at 10 s, benchmarks/results/anchors.md).
    """

    covered: tuple[str, ...] = ()  # heuristics whose orders another phase holds
    name: str = "recipes"
    wall_net: bool = False  # each recipe is checked against the clock below

    def applies(self, s: Search) -> bool:
        return not s.closed

    def estimate(self, s: Search) -> float:
        return 0.0

    def allowance(self, s: Search) -> float:
        return heuristic_share(s.inst) * s.limit

    def costed(self, s: Search) -> list[tuple[float, Method]]:
        """(estimated cost, method), cheapest first, ties by name."""
        n = s.inst.num_ops
        found = applicable(s.problem, exclude=self.covered)
        return sorted(((m.cost_per_op * n, m) for m in found), key=lambda cm: (cm[0], cm[1].name))

    @staticmethod
    def _all_fit(recipes: list[tuple[float, Method]], limit: float) -> bool:
        """Whether every recipe runs whatever the phases before took."""
        return sum(c for c, _ in recipes) <= MODELLED.heuristic_share * limit

    def room_before(self, s: Search) -> float:
        """Nominal seconds a phase before this one (the grid) may still take so that the searches fit
        :meth:`allowance`: unbounded when every recipe runs anyway, when none is a search, or when the
        searches would not fit even if that phase took nothing (yielding would buy nothing)."""
        recipes = self.costed(s)
        searches = sum(c for c, m in recipes if m.role != "recipe")
        if searches <= 0.0 or self._all_fit(recipes, s.limit):
            return math.inf
        room = self.allowance(s) - s.budget.spent - searches
        return room if room >= 0.0 else math.inf

    def run(self, s: Search) -> None:
        recipes, budget = self.costed(s), s.budget
        large = s.inst.num_ops > FULL_MODEL_OPS
        if self._all_fit(recipes, s.limit):  # all of them ...
            budget.charge(sum(c for c, _ in recipes))
            for cost, m in recipes:  # ... unless the method's wall deadline would pass (then it says so)
                if s.found and large and not budget.wall_fits(cost, "recipes"):
                    continue
                self._add(s, m)
            return
        searches_first = sorted(recipes, key=lambda cm: cm[1].role == "recipe")  # stable: cheapest first in each
        for cost, m in searches_first:
            fixed = m.role == "recipe"
            if s.found and not fixed and budget.spent + cost > self.allowance(s) + FLOAT_SLACK_S:
                continue
            if s.found and time.perf_counter() + cost > (budget.deadline if fixed else s.stop):
                note_wall_cut("recipes")
                continue
            budget.charge(cost)
            self._add(s, m)

    @staticmethod
    def _add(s: Search, m: Method) -> None:
        s.keep([(name, Incumbent.of(s.inst, schedule.order()))
                for name, schedule in heuristic_schedules(s.problem, s.options, [m])])

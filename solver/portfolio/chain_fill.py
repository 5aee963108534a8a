"""``auto``'s final phase above ``FULL_MODEL_OPS`` ops: order searches from the incumbent until the counted
budget reaches the limit.

Why: no CP-SAT model runs above ``FULL_MODEL_OPS`` ops, so the windows that fill the limit on smaller
problems (:mod:`.lns`) do not apply there, and ``auto`` returned as soon as its heuristics ended: after 2-8 s
of a 10 s limit and 14-24 s of 60 on the large rows of ``benchmarks/results/anchors_large_ops.md``, with
gaps of up to 7% still open. Two neighbourhoods of
:mod:`~pipesched.solver.heuristics.interleaved_local` apply to any order (loop or V, any v, within the caps):

1. the critical-chain search (:func:`~pipesched.solver.heuristics.interleaved_local.local_search`) from
   the incumbent, then from the other orders held, each to its local optimum or until the count is spent;
2. then every device's tail re-chosen by each rule
   (:func:`~pipesched.solver.heuristics.interleaved_local.tail_variants`): the best variant, when better
   than the incumbent, is a new start for step 1 (a restart from a perturbed incumbent).

Both are counted, never clocked: trials at ``CHAIN_TRIAL_S_PER_OP`` and tails at ``TAIL_VARIANT_S_PER_OP``
idle seconds per op (:mod:`pipesched.solver.budget.limit`), from what the phases before left of the limit,
so the answer repeats; the method's deadline is only a net. When neither neighbourhood improves the best
order, the limit is left unused and the answer says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from ..budget import FULL_MODEL_OPS, finish_margin, note_wall_cut
from ..budget.limit import CHAIN_TRIAL_S_PER_OP, TAIL_VARIANT_S_PER_OP
from ..core.schedule import Order
from ..core.tolerance import slack
from ..heuristics.interleaved_local import local_search, tail_variants
from ..heuristics.search import Search
from ..heuristics.trials import Trials
from ..timing.retime import Incumbent

_T = TypeVar("_T")

LOCAL_OPTIMUM = ("the limit was not used up: the critical-chain search ended at a local optimum from every "
                 "order held, and no re-chosen tail improved the best (both neighbourhoods are exhausted)")


@dataclass(frozen=True)
class ChainFillPhase:
    """The order searches of the module docstring, while the gap is open and the counted budget has room."""

    name: str = "critical-chain search"
    wall_net: bool = True  # and before each search, below; within one, the trials' own net

    def applies(self, s: Search) -> bool:
        return s.incumbent is not None and not s.proven and s.inst.num_ops > FULL_MODEL_OPS

    def estimate(self, s: Search) -> float:
        return self.start_cost(s)

    def start_cost(self, s: Search) -> float:
        """What one search costs before and after its trials, which no trial's wall check stops: timing its
        start, tracing the first chain, and timing its answer twice
        (:func:`~pipesched.solver.timing.retime.compact`). Measured 0.38 s at 24.6k ops on a V case, where a
        trial is counted 0.05 s (``python benchmarks/phase_trace.py --set tuning --cases 29``): ten trials."""
        return 10 * self.trial_cost(s)

    def allowance(self, s: Search) -> float:
        return s.budget.rest - finish_margin(s.inst)

    @staticmethod
    def trial_cost(s: Search) -> float:
        return CHAIN_TRIAL_S_PER_OP * s.inst.num_ops

    @staticmethod
    def tail_cost(s: Search) -> float:
        return TAIL_VARIANT_S_PER_OP * s.inst.num_ops

    def run(self, s: Search) -> None:
        assert s.incumbent is not None
        best = s.incumbent
        starts: list[Order] = [best.order, *(inc.order for _, inc in s.found if inc.order != best.order)]
        while True:
            for order in starts:
                got = self._search(s, order)
                if got is not None and got.objective < best.objective - slack(best.objective):
                    best = got
                if s.meets_bound(best.objective):
                    s.settle(best)
                    return
            s.settle(best)
            start = self._best_tail(s, best)
            if start is None:
                return
            starts = [start]

    def _search(self, s: Search, order: Order) -> Incumbent | None:
        """:func:`local_search` from ``order`` with the trials the rest affords (None when it affords none
        or the wall net has no room for its set-up)."""
        got, _ = self._counted(s, self.trial_cost(s), self.start_cost(s), lambda t: local_search(s.inst, order, t))
        return got

    def _best_tail(self, s: Search, best: Incumbent) -> Order | None:
        """The best of ``best``'s re-chosen tails when it beats ``best``; None when none does (the note says
        the neighbourhoods are exhausted) or the count is spent."""
        variants, trials = self._counted(s, self.tail_cost(s), self.tail_cost(s),  # a tail must end in time
                                         lambda t: tail_variants(s.inst, best.order, t, 0)[1:])
        if trials is None or trials.cut:
            return None
        top = min(variants or (), default=None)
        if top is None or top[0][0] >= best.objective - slack(best.objective):
            if trials.left > 0:  # every rule was tried
                s.notes.append(LOCAL_OPTIMUM)
            return None
        return top[2]

    def _counted(self, s: Search, unit: float, reserve: float,
                 search: Callable[[Trials], _T]) -> tuple[_T | None, Trials | None]:
        """``search`` with as many units of ``unit`` idle seconds as the rest of the limit affords, its wall
        net ``reserve`` seconds before the deadline (what it does after its last unit); charged the units it
        used, and a cut by the net recorded. ``(None, None)`` when the rest affords none or the net has no
        room for ``reserve`` (recorded as a cut)."""
        count = int(self.allowance(s) / unit)
        if count <= 0 or not s.budget.wall_fits(reserve, self.name):
            return None, None
        trials = Trials(count, s.budget.deadline - reserve)
        out = search(trials)
        s.budget.charge((count - trials.left) * unit)
        if trials.cut:
            note_wall_cut(self.name)
        return out, trials

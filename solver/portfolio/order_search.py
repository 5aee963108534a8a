"""``auto``'s interleaved order search at limits above the canonical one, beside the windows.

Why: every phase before the windows is budgeted at ``min(L, CANONICAL_LIMIT_S)`` so that a larger limit
starts the windows from the same answer (:mod:`.lns`). That also capped the interleaved memory greedy's
order search (:class:`~pipesched.solver.heuristics.interleaved_memory.InterleavedPhase`) at its 10 s count
of trials, and on the capped interleaved models CP-SAT's windows rarely improve what that search finds:
on the anchors' 6.2B loop v2 p8 case the search given its 60 s count (2343 trials, 2.6 s of one idle
core here) ends at 1405.61, its 10 s count at 1409.61, and ``auto`` at 60 s returned 1408.94 after 50 s
of windows (benchmarks/results/anchors_interleaved_60s.md at a937b0b).

So above the canonical limit this phase runs the search with the count the whole limit gives it
(``INTERLEAVED_SEARCH_SHARE`` of ``L``), from the same starts, first, and is charged the trials it
used, so a search that converges early leaves the windows the rest; the windows then
run from the canonical answer as before (it only
joins the candidates), and the answer is the better of the two (:class:`BestFoundPhase`). Both are
monotone in ``L``: the search spends its trials in a fixed sequence, so a larger count runs a longer
prefix of it, and the windows' allowance, ``L`` less the trials used (which grow by at most
``INTERLEAVED_SEARCH_SHARE`` of any growth of ``L``), still grows with ``L``, so the windows
a limit runs remain a prefix of a larger limit's. So a larger limit still never returns a worse answer.
It runs first because the windows are cut by the wall clock where their counted cost runs behind it;
at or below the canonical limit it does not apply and nothing changes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..budget import FULL_MODEL_OPS, INTERLEAVED_SEARCH_SHARE, PER_OP, RETIMED_ORDERS, note_wall_cut
from ..budget.limit import CANONICAL_LIMIT_S
from ..heuristics.interleaved_memory import applies as interleaved_applies
from ..heuristics.interleaved_memory import interleaved_candidates
from ..heuristics.search import Search
from ..heuristics.trials import Trials


@dataclass(frozen=True)
class LongerOrderSearchPhase:
    """The interleaved order search with the whole limit's count of trials (module docstring)."""

    name: str = "interleaved order search"
    wall_net: bool = False  # the trials' own net: the method's deadline

    def applies(self, s: Search) -> bool:
        return s.incumbent is not None and not s.proven and self.reserve(s) > 0.0

    def reserve(self, s: Search) -> float:
        """Its share of the limit above the canonical part: what the longer search adds at most (zero
        where the phase does not apply)."""
        if s.limit <= CANONICAL_LIMIT_S or s.inst.num_ops > FULL_MODEL_OPS or not interleaved_applies(s.inst):
            return 0.0
        return INTERLEAVED_SEARCH_SHARE * (s.limit - CANONICAL_LIMIT_S)

    def estimate(self, s: Search) -> float:
        return 0.0  # charged the trials it used, below

    def allowance(self, s: Search) -> float:
        return self.reserve(s)

    @staticmethod
    def per_trial(s: Search) -> float:
        return PER_OP.interleaved_trial * s.inst.num_ops

    def trials(self, s: Search) -> int:
        """The search's count at the whole limit, as :class:`InterleavedPhase` would size it there."""
        return int(INTERLEAVED_SEARCH_SHARE * s.limit / self.per_trial(s))

    def run(self, s: Search) -> None:
        count = self.trials(s)
        trials = Trials(count, s.budget.deadline)
        found = interleaved_candidates(s.inst, keep=RETIMED_ORDERS, trials=trials)
        if trials.cut:
            note_wall_cut(self.name)
        s.budget.charge((count - trials.left) * self.per_trial(s))
        s.keep([(f"interleaved-memory[{k}]", c) for k, c in enumerate(found)])  # not the windows' start


@dataclass(frozen=True)
class BestFoundPhase:
    """The best order held (the heuristics' and the longer search's) when better than the incumbent."""

    name: str = "best order found"
    wall_net: bool = False

    def applies(self, s: Search) -> bool:
        return s.incumbent is not None and bool(s.found) and not s.proven

    def estimate(self, s: Search) -> float:
        return 0.0

    def allowance(self, s: Search) -> float:
        return 0.0

    def run(self, s: Search) -> None:
        assert s.incumbent is not None
        best = s.found[0][1]
        if best.objective < s.incumbent.objective:
            s.settle(best)

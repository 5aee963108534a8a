"""``auto``'s interleaved order search at limits above the canonical one, after the windows.

Why: every phase before the windows is budgeted at ``min(L, CANONICAL_LIMIT_S)`` so that a larger limit
starts the windows from the same answer (:mod:`.lns`). That also capped the interleaved memory greedy's
order search (:class:`~pipesched.solver.heuristics.interleaved_memory.InterleavedPhase`) at its 10 s count
of trials, and on the capped interleaved models CP-SAT's windows rarely improve what that search finds:
on the anchors' 1.5B loop v2 p8 case the search given its 60 s count (2343 trials, 2.8 s of one idle
core here) ends at 837.50, its 10 s count at 841.47, and ``auto`` at 60 s returned 841.60 after 50 s of
windows (benchmarks/results/anchors_60s.md at a937b0b).

So above the canonical limit this phase runs the search with the count the whole limit gives it
(``INTERLEAVED_SEARCH_SHARE`` of ``L``), from the same starts: the search spends its trials in a fixed
sequence, so a larger count runs a longer prefix of the same search and its best only improves. It runs
after the windows, whose allowance leaves it its share of the limit above the canonical part
(:meth:`reserve`); that allowance, ``L`` less the reserve, still grows with ``L``, so the windows a limit
runs remain a prefix of a larger limit's, and the answer, the better of the two, never gets worse as
``L`` grows. At or below the canonical limit the reserve is zero and nothing changes.
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
        return (s.incumbent is not None and not s.proven and s.inst.num_ops <= FULL_MODEL_OPS
                and interleaved_applies(s.inst) and self.reserve(s) > 0.0)

    def reserve(self, s: Search) -> float:
        """Nominal seconds kept from the windows for this search: its share of the limit above the
        canonical part (zero where the phase does not apply)."""
        if s.limit <= CANONICAL_LIMIT_S or s.inst.num_ops > FULL_MODEL_OPS or not interleaved_applies(s.inst):
            return 0.0
        return INTERLEAVED_SEARCH_SHARE * (s.limit - CANONICAL_LIMIT_S)

    def estimate(self, s: Search) -> float:
        return 0.0  # kept back from the windows (reserve); charged below

    def allowance(self, s: Search) -> float:
        return self.reserve(s)

    def trials(self, s: Search) -> int:
        """The search's count at the whole limit, as :class:`InterleavedPhase` would size it there."""
        return int(INTERLEAVED_SEARCH_SHARE * s.limit / (PER_OP.interleaved_trial * s.inst.num_ops))

    def run(self, s: Search) -> None:
        assert s.incumbent is not None
        trials = Trials(self.trials(s), s.budget.deadline)
        found = interleaved_candidates(s.inst, keep=RETIMED_ORDERS, trials=trials)
        if trials.cut:
            note_wall_cut(self.name)
        s.budget.charge(self.reserve(s))
        if found and found[0].objective < s.incumbent.objective:
            s.settle(found[0])

"""``auto``'s final phase: while the gap is open, CP-SAT re-solves windows of the incumbent until the
counted budget reaches the limit.

How ``auto`` uses its limit ``L`` (the design; ``docs/solvers.md`` says it for users):

1. **The canonical part.** Every phase before this one (heuristics, re-timing, local search, the ILP,
   bounds, the full-model search) is budgeted as at ``min(L, CANONICAL_LIMIT_S)``
   (:mod:`pipesched.solver.budget.limit`). For every ``L`` at or above the canonical limit its answer is
   therefore the same incumbent, bound and counted use.
2. **Counted use.** Every phase records the nominal idle-machine seconds it stands for
   (:attr:`~pipesched.solver.budget.Budget.counted`): the heuristics their share, the re-timing and the
   local search their estimates, each CP-SAT run the deterministic time it used at its kind of model's
   idle rate (:func:`~pipesched.solver.exact.cpsat.run.counted_seconds`). Nothing here reads the clock.
3. **Windows.** This phase walks a fixed cover of the schedule (:func:`~pipesched.solver.exact.cpsat.lns.windows`)
   and re-solves each window from the incumbent (:func:`~pipesched.solver.exact.cpsat.lns.solve_window`),
   keeping improvements; a pass without improvement grows the windows; on problems of at most
   ``SMALL_OPS`` ops a pass that improved is followed by a full-model search with the best bound (it can
   prove). A window starts only while its largest cost fits in what is left of ``L`` after the finish
   margin, so the counted use ends within one window of the limit: at least 75% of it whenever the
   answer is not proven, unless the windows are exhausted (the answer's summary then says so).

**Monotone limit.** For ``L >= CANONICAL_LIMIT_S`` the windows start from the same state and each one's
result is a function of the incumbent, the window and its deterministic budget alone, so the windows run
at ``L`` are a prefix of those run at any larger limit, and the answer can only improve along them: a
larger limit never returns a worse answer (the wall clock can still cut a loaded machine's run short;
the answer then says so). Below the canonical limit the phases grow with ``L`` as they always did and
the windows fill the rest; ``tests/solver/test_limit_use.py`` checks 2, 5 and 10 s on tuning-like cases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..budget import (
    DTIME_PER_SECOND,
    FULL_MODEL_OPS,
    SMALL_OPS,
    finish_margin,
    search_cost,
)
from ..budget.limit import (
    CANONICAL_LIMIT_S,
    LNS_GROWTH,
    LNS_PROOF_SHARE,
    LNS_WINDOW_OPS,
    LNS_WINDOW_SHARE,
)
from ..exact.cpsat.lns import WINDOW_MIN_GAIN, solve_window, window_cost, windows
from ..exact.cpsat.run import solve_model
from ..heuristics.search import Search

#: Passes with a shifted cover before the windows repeat (:func:`~pipesched.solver.exact.cpsat.lns.windows`).
SHIFTS = 4
#: Longest window search, in windows' nominal seconds: doubled after a pass without improvement at the
#: largest window size (twice: a window that does not fit leaves at most its cost of the limit unused).
LNS_MAX_SEARCH = 2
EXHAUSTED = ("the limit was not used up: CP-SAT searched every window of the schedule to its end and found "
             f"no order {WINDOW_MIN_GAIN:.2%} better in any (the neighbourhoods are exhausted)")
REPEATED = ("the limit was not used up: every window of the schedule, at its largest size and search, left it "
            "as it was (the windows would only repeat)")


def window_seconds(limit: float) -> float:
    """Nominal seconds of one window's search: a share of ``min(limit, CANONICAL_LIMIT_S)``."""
    return LNS_WINDOW_SHARE * min(limit, CANONICAL_LIMIT_S)


def proof_seconds(limit: float) -> float:
    """Nominal seconds of the full-model search after a pass that improved, likewise."""
    return LNS_PROOF_SHARE * min(limit, CANONICAL_LIMIT_S)


@dataclass(frozen=True)
class WindowsPhase:
    """The windows (module docstring), from the incumbent, while the gap is open and the counted budget
    has room for one more."""

    name: str = "CP-SAT windows"
    wall_net: bool = False  # checked before each window, below

    def applies(self, s: Search) -> bool:
        return s.incumbent is not None and not s.proven and s.inst.num_ops <= FULL_MODEL_OPS

    def estimate(self, s: Search) -> float:
        return window_cost(s.inst, window_seconds(s.limit))

    def allowance(self, s: Search) -> float:
        return s.budget.rest - finish_margin(s.inst)

    def fits(self, s: Search, cost: float) -> bool:
        """Whether a step of estimated ``cost`` fits the counted budget (the decision) and the wall (the net).
        An improving window's re-timing is counted after it (``retime_cost``), so the count may end up to
        that much past the limit's finish margin; the wall net keeps it back (:func:`solve_window`)."""
        return cost <= self.allowance(s) and s.budget.wall_fits(cost, self.name)

    def run(self, s: Search) -> None:
        size, seconds, passes, idle = LNS_WINDOW_OPS, window_seconds(s.limit), 0, 0
        while True:
            improved, complete = False, True
            for window in windows(s.inst, size, passes):
                if s.proven or not self.fits(s, window_cost(s.inst, seconds)):
                    return
                assert s.incumbent is not None
                runs = window.runs(s.incumbent)
                if not runs:
                    continue
                res = solve_window(s.inst, s.incumbent, runs, bound=s.bound, seconds=seconds,
                                   deadline=s.budget.deadline)
                s.budget.charge(res.counted)
                complete = complete and res.complete
                if res.incumbent.objective < s.incumbent.objective:
                    improved = True
                    s.settle(res.incumbent)
            passes += 1
            if improved:
                idle = 0
                if s.inst.num_ops <= SMALL_OPS and not self.prove(s):
                    return
            elif size < s.inst.num_ops:  # a pass without improvement: larger windows
                size = min(s.inst.num_ops, math.ceil(size * LNS_GROWTH))
            elif complete:
                s.notes.append(EXHAUSTED)
                return
            elif seconds < LNS_MAX_SEARCH * window_seconds(s.limit):  # then longer searches of them
                seconds *= 2
            else:  # then the other shifts of the cover, after which the windows repeat
                idle += 1
                if idle >= SHIFTS:
                    s.notes.append(REPEATED)
                    return

    def prove(self, s: Search) -> bool:
        """The full model from the incumbent with the best bound for :func:`proof_seconds`; False when it
        proved the incumbent optimal or does not fit (the windows stop there: any step that does not fit
        ends the phase, so the steps a limit runs are a prefix of a larger limit's)."""
        seconds = proof_seconds(s.limit)
        if not self.fits(s, search_cost(s.inst) + seconds):
            return False  # the end: a larger limit runs it, so the windows after it must wait for it
        assert s.incumbent is not None
        res = solve_model(s.inst, s.incumbent, s.budget.wall_left(), s.options.workers, known_bound=s.bound,
                          deadline=s.budget.deadline, nominal=seconds, dtime=seconds * DTIME_PER_SECOND)
        s.budget.charge(res.counted)
        s.settle(res.incumbent, res.proven_optimal, res.bound or 0.0)
        return not s.proven

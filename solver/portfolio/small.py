"""Small problems (at most ``ILP_FIRST_OPS`` (:mod:`pipesched.solver.budget`) ops) go to the ILP first: it proves what CP-SAT cannot.

Why (``docs/design/v-tiny-diagnosis.md``): under stage span with a memory cap, CP-SAT's bound
sits at the uncapped optimum until branching alone proves the answer (5.79 deterministic s and
11.6k branches on ``benchmarks/cases/v_tiny.json``, 24 ops), because a span ``last - first`` of two
free variables gets nothing from bound propagation and the linear relaxation of a cumulative is
weak. The ILP's order binaries carry the memory accounting into its LP, and CBC proves the same
problem in 0.2 s. Measured on a seeded sweep of 30 problems of 8-48 ops (V and loop, both
objectives, tight caps, comm; ``tests/solver/test_small_proofs.py`` draws the same kind), 10 s
limit, load average about 5: ``ilp`` proved every one (at most 3.5 s, a V p = 2, m = 4 stage-span
case), ``auto`` with CP-SAT alone left 3 of 19 V stage-span cases ``feasible`` after 9.4-9.6 s.
Racing both would halve the two cores' speed for each; the ILP first, then CP-SAT from its answer
with what is left, costs little on the cases CP-SAT proves (the ILP proves them in 0.01-1.7 s too).

Which ILP backend: HiGHS when installed (``pipesched[highs]``), else CBC. On the 14 cases of
``tests/solver/test_small_proofs.py`` (load average about 10) the hardest, a loop p = 2, m = 4,
v = 2 stage-span case with a tight cap (48 ops), took HiGHS 2.6 s and CBC 16-21 s; on the others
HiGHS took 0.03-1.4 s, CBC 0.02-2.5 s.

The ILP stops on the wall clock (CBC has no deterministic clock), so a proof that needs close to
its share could end differently on a much slower machine; its share is far above what the sweep's
slowest proof needed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..budget import ILP_FIRST_MIN_S, ILP_FIRST_OPS, ILP_FIRST_SHARE
from ..core.errors import InvalidScheduleError, NotApplicableError
from ..core.instance import Instance
from ..core.method import SolveOptions
from ..core.problem import Problem
from ..exact.ilp.backends import highs_available
from ..exact.ilp.method import ILP
from ..heuristics.search import Search
from ..timing.finalize import finalize
from ..timing.retime import Incumbent, retime
from ..timing.simulate import DeadlockError


def ilp_first(problem: Problem, inst: Instance, inc: Incumbent, seconds: float) -> tuple[Incumbent, bool, float | None]:
    """(best incumbent, proven optimal, ILP's lower bound) after ``seconds`` of the ILP warm-started
    from ``inc``; the incumbent is never worse than ``inc``."""
    try:
        hint = finalize(problem, "auto", inc.start, inst=inst)
        backend = "highs" if highs_available() else None
        answer = ILP.run(problem, SolveOptions(time_limit_s=seconds, hint=hint, workers=1,
                                                             backend=backend))
    except (NotApplicableError, InvalidScheduleError, ValueError):  # ValueError: PuLP refused a start value
        return inc, False, None
    if not answer.ops:
        return inc, False, answer.lower_bound
    try:
        cand = retime(inst, answer.order())
    except DeadlockError:
        return inc, False, answer.lower_bound
    best = cand if cand.objective < inc.objective else inc
    proven = answer.status == "optimal" and best.objective <= (answer.objective_value or float("inf"))
    return best, proven, answer.lower_bound


@dataclass(frozen=True)
class IlpFirstPhase:
    """The ILP from the incumbent on problems of at most ``ILP_FIRST_OPS`` ops while the gap is open, with
    ``ILP_FIRST_SHARE`` of what is left (when that is at least ``ILP_FIRST_MIN_S``); CP-SAT gets the rest."""

    name: str = "ILP first"
    wall_net: bool = False  # the ILP gets at most the wall time left

    def applies(self, s: Search) -> bool:
        return s.incumbent is not None and not s.proven and s.inst.num_ops <= ILP_FIRST_OPS

    def estimate(self, s: Search) -> float:
        return ILP_FIRST_MIN_S

    def allowance(self, s: Search) -> float:
        return ILP_FIRST_SHARE * s.budget.rest

    def run(self, s: Search) -> None:
        assert s.incumbent is not None
        seconds = s.budget.claim(ILP_FIRST_SHARE)
        inc, proven, ilp_bound = ilp_first(s.problem, s.inst, s.incumbent, min(seconds, s.budget.wall_left()))
        s.settle(inc, True if proven else None, min(ilp_bound or 0.0, inc.objective))

"""Above ``FULL_MODEL_OPS`` ops ``auto`` fills its limit with counted order searches from the incumbent
(solver/portfolio/chain_fill.py): counted, repeatable, monotone in what is left, and honest when its
neighbourhoods are exhausted. The phase's ``run`` is exercised on a small problem (its searches are the
same at any size) with no wall clock: the count alone decides."""

from __future__ import annotations

from pipesched.solver.budget import FULL_MODEL_OPS, Budget, finish_margin
from pipesched.solver.core.instance import Instance
from pipesched.solver.core.method import SolveOptions
from pipesched.solver.core.problem import Problem
from pipesched.solver.heuristics.interleaved_memory import interleaved_candidates
from pipesched.solver.heuristics.search import Search
from pipesched.solver.portfolio.auto import FINAL
from pipesched.solver.portfolio.chain_fill import LOCAL_OPTIMUM, ChainFillPhase
from pipesched.solver.portfolio.order_search import BestFoundPhase

FILL = ChainFillPhase()


def _interleaved(m: int = 8) -> Problem:
    """Loop v = 2 under a cap below the interleaved recipes' peak: the policies' best leaves room."""
    return Problem(devices=4, microbatches=m, stages_per_device=2, objective="stage_span",
                   costs={"forward": 1.0, "backward_input": 1.1, "backward_weight": 0.7, "comm": 0.05},
                   memory={"forward": 1.0, "backward_input": 0.0, "backward_weight": -1.0, "limit": 9.0})


def _search(problem: Problem, limit: float) -> Search:
    inst = Instance.from_problem(problem)
    s = Search(problem, inst, SolveOptions(time_limit_s=limit, workers=1), Budget(limit), bound=0.0)
    s.settle(interleaved_candidates(inst, keep=1)[0], proven=False)  # the policies' best, no search
    return s


def test_it_is_the_last_final_phase_and_only_where_the_windows_do_not_run() -> None:
    assert type(FINAL[-1]) is ChainFillPhase and type(FINAL[-2]) is BestFoundPhase
    assert not FILL.applies(_search(_interleaved(), 10.0))
    large = _search(_interleaved(m=FULL_MODEL_OPS // 24 + 1), 10.0)  # 4 devices x 2 chunks x 3 kinds
    assert large.inst.num_ops > FULL_MODEL_OPS and FILL.applies(large)
    large.proven = True
    assert not FILL.applies(large)


def test_it_is_charged_what_it_counted_and_repeats() -> None:
    runs = []
    for _ in range(2):
        s = _search(_interleaved(), 0.5)
        allowance = FILL.allowance(s)
        FILL.run(s)
        assert 0.0 < s.budget.spent <= allowance  # never more than the rest of the limit
        runs.append((s.incumbent.objective, s.budget.spent, [list(o) for o in s.incumbent.order]))
    assert runs[0] == runs[1]


def test_more_of_the_limit_left_never_returns_worse() -> None:
    found, spent = [], []
    start = _search(_interleaved(), 1.0).incumbent
    assert start is not None
    for limit in (0.15, 0.2, 0.3, 0.5, 1.0, 3.0):
        s = _search(_interleaved(), limit)
        FILL.run(s)
        found.append(s.incumbent.objective)
        spent.append(s.budget.spent)
    assert found == sorted(found, reverse=True) and spent == sorted(spent)
    assert found[-1] < start.objective  # it does improve the policies' best here


def test_an_exhausted_search_leaves_the_limit_and_says_so() -> None:
    s = _search(_interleaved(), 1000.0)
    FILL.run(s)
    assert LOCAL_OPTIMUM in s.notes
    assert s.budget.spent < s.budget.limit - finish_margin(s.inst)
    short = _search(_interleaved(), 0.15)
    FILL.run(short)
    assert LOCAL_OPTIMUM not in short.notes  # the count ran out first: nothing is claimed

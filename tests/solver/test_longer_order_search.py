"""Above the canonical limit the interleaved order search gets the whole limit's count of trials, beside
the windows, without breaking the monotone limit (solver/portfolio/order_search.py)."""

from __future__ import annotations

from capped_interleaved import interleaved as _interleaved
from capped_interleaved import search_from_policies as _search

from pipesched.solver.budget import PER_OP, RETIMED_ORDERS, Budget
from pipesched.solver.budget.limit import CANONICAL_LIMIT_S
from pipesched.solver.core.instance import Instance
from pipesched.solver.core.method import SolveOptions
from pipesched.solver.core.problem import Problem
from pipesched.solver.heuristics.interleaved_memory import interleaved_candidates
from pipesched.solver.heuristics.search import Search
from pipesched.solver.heuristics.trials import Trials
from pipesched.solver.portfolio.auto import FINAL
from pipesched.solver.portfolio.lns import WindowsPhase
from pipesched.solver.portfolio.order_search import BestFoundPhase, LongerOrderSearchPhase

LONGER_SEARCH = LongerOrderSearchPhase()


def test_nothing_is_kept_back_at_or_below_the_canonical_limit_or_off_interleaved() -> None:
    for limit in (2.0, CANONICAL_LIMIT_S):
        assert LONGER_SEARCH.reserve(_search(_interleaved(), limit)) == 0.0
    v_problem = Problem(devices=4, microbatches=8, stages_per_device=2, placement="v", memory={"limit": 6})
    assert LONGER_SEARCH.reserve(_search(_interleaved(), 60.0)) > 0.0
    inst = Instance.from_problem(v_problem)
    s = Search(v_problem, inst, SolveOptions(time_limit_s=60.0), Budget(60.0), bound=0.0)
    assert LONGER_SEARCH.reserve(s) == 0.0


def test_final_runs_the_search_then_the_windows_then_takes_the_better() -> None:
    assert [type(ph) for ph in FINAL][:3] == [LongerOrderSearchPhase, WindowsPhase, BestFoundPhase]


def test_the_windows_allowance_after_the_search_still_grows_with_the_limit() -> None:
    allowances = []
    for limit in (10.0, 20.0, 60.0, 600.0):
        s = _search(_interleaved(), limit)
        if LONGER_SEARCH.applies(s):
            LONGER_SEARCH.run(s)
        allowances.append(WindowsPhase().allowance(s))
    assert allowances == sorted(allowances) and len(set(allowances)) == len(allowances)


def test_it_offers_what_the_search_finds_with_the_whole_limits_trials() -> None:
    problem = _interleaved()
    s = _search(problem, 60.0)
    before = s.incumbent
    assert before is not None
    LONGER_SEARCH.run(s)
    assert s.incumbent is before  # a candidate: the windows start from the canonical answer
    counted = Trials(LONGER_SEARCH.trials(s))
    expected = interleaved_candidates(s.inst, keep=RETIMED_ORDERS, trials=counted)[0]
    used = LONGER_SEARCH.trials(s) - counted.left
    assert used > 0 and s.budget.spent == used * PER_OP.interleaved_trial * s.inst.num_ops  # what it used
    BestFoundPhase().run(s)
    assert s.incumbent.objective == min(before.objective, expected.objective)
    assert expected.objective < before.objective  # here the search improves the policies' best


def test_a_larger_limit_runs_a_longer_prefix_of_the_same_search() -> None:
    inst = Instance.from_problem(_interleaved())
    found = [interleaved_candidates(inst, keep=RETIMED_ORDERS, trials=Trials(n))[0].objective for n in (0, 5, 20, 80, 400)]
    assert found == sorted(found, reverse=True)

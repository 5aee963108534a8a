"""Above ``FULL_MODEL_OPS`` ops ``auto`` fills its limit with counted order searches from the incumbent
(solver/portfolio/chain_fill.py): counted, repeatable, monotone in what is left, and honest when its
neighbourhoods are exhausted. The phase's ``run`` is exercised on a small problem (its searches are the
same at any size) with no wall clock: the count alone decides."""

from __future__ import annotations

from capped_interleaved import interleaved as _interleaved
from capped_interleaved import search_from_policies as _search

from pipesched.solver.budget import FULL_MODEL_OPS, finish_margin
from pipesched.solver.portfolio.auto import FINAL
from pipesched.solver.portfolio.chain_fill import LOCAL_OPTIMUM, ChainFillPhase
from pipesched.solver.portfolio.order_search import BestFoundPhase

FILL = ChainFillPhase()


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

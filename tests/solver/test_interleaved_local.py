"""Tail re-choice and order local search for interleaved orders under a tight cap (issue 12 target 3):
every order valid within the caps, never worse than where it started, and below IZB's order on the
target's family at p = 4."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from test_interleaved_memory import loop_problem

from pipesched.solver import Instance
from pipesched.solver.core.metrics import peak_memory
from pipesched.solver.heuristics.classic.interleaved_zb import interleaved_zb_order
from pipesched.solver.heuristics.interleaved_local import (
    TAILS,
    improve,
    local_search,
    reschedule_tail,
)
from pipesched.solver.heuristics.interleaved_memory import interleaved_candidates
from pipesched.solver.heuristics.trials import Trials
from pipesched.solver.timing.finalize import finalize
from pipesched.solver.timing.retime import retime


def _within(inst: Instance, order: list) -> bool:
    return all(x <= cap * (1 + 1e-9) for x, cap in zip(peak_memory(inst, order), inst.limit, strict=True))


@settings(max_examples=8, deadline=None)
@given(p=st.integers(2, 4), v=st.integers(2, 3), extra=st.integers(0, 4), seed=st.integers(0, 10_000),
       split=st.booleans(), objective=st.sampled_from(["makespan", "stage_span"]))
def test_valid_within_the_cap_and_never_worse(p: int, v: int, extra: int, seed: int, split: bool,
                                              objective: str) -> None:
    problem = loop_problem(p, p + extra, v, seed, split, objective)
    inst = Instance.from_problem(problem)
    izb = interleaved_zb_order(inst)
    assert _within(inst, izb)  # the cap is its peak
    for tf, deep, f_first in TAILS:
        got = reschedule_tail(inst, izb, tf, deep, f_first)
        if got is not None and _within(inst, got):
            finalize(problem, "interleaved-local", retime(inst, got).start, inst=inst)  # raises if invalid
    searched = local_search(inst, izb, Trials(400))
    assert _within(inst, searched.order)
    finalize(problem, "interleaved-local", searched.start, inst=inst)
    assert searched.objective <= retime(inst, izb).objective + 1e-6
    before = interleaved_candidates(inst, keep=1)
    after = interleaved_candidates(inst, keep=1, trials=Trials(400))
    assert after and _within(inst, after[0].order)
    finalize(problem, "interleaved-local", after[0].start, inst=inst)
    assert after[0].objective <= min([retime(inst, izb).objective] + [c.objective for c in before]) + 1e-6


def test_below_izb_at_p4() -> None:
    """Target 3's family at p = 4, m = 8, v = 2: the tails and the search end below IZB's order."""
    for seed in range(3):
        inst = Instance.from_problem(loop_problem(4, 8, 2, seed))
        izb = interleaved_zb_order(inst)
        got = improve(inst, [izb], Trials(100_000))
        assert got is not None and _within(inst, got.order)
        assert got.objective < retime(inst, izb).objective - 1e-6, seed


def test_search_keeps_the_microbatch_order_and_every_op() -> None:
    inst = Instance.from_problem(loop_problem(3, 6, 2, 7))
    izb = interleaved_zb_order(inst)
    got = local_search(inst, izb, Trials(100_000))
    for before, after in zip(izb, got.order, strict=True):
        assert sorted(before) == sorted(after)
        for kind in "FBW":
            for s in {op.stage for op in before}:
                line = [op.microbatch for op in after if op.kind == kind and op.stage == s]
                assert line == sorted(line)


def test_a_trial_count_makes_the_answer_repeat_and_bounds_the_work() -> None:
    """The search stops on a count, not the clock: the same count gives the same order, a small count
    is spent exactly (and still gives a valid order no worse than the start), and the run to its end
    needs more trials than that."""
    problem = loop_problem(4, 8, 2, 3)
    inst = Instance.from_problem(problem)
    izb = interleaved_zb_order(inst)
    first, second = Trials(60), Trials(60)
    a, b = improve(inst, [izb], first), improve(inst, [izb], second)
    assert a is not None and b is not None and a.order == b.order
    assert first.left == second.left == 0 and not first.cut
    assert _within(inst, a.order) and a.objective <= retime(inst, izb).objective + 1e-6
    finalize(problem, "interleaved-local", a.start, inst=inst)
    full = Trials(100_000)
    improve(inst, [izb], full)
    assert 60 < 100_000 - full.left < 100_000  # it ends by itself, after more than the small count


def test_the_wall_clock_is_only_a_net() -> None:
    inst = Instance.from_problem(loop_problem(3, 6, 2, 1))
    izb = interleaved_zb_order(inst)
    trials = Trials(100_000, deadline=0.0)  # long past
    got = improve(inst, [izb], trials)
    assert trials.cut and trials.left == 100_000
    assert got is not None and got.order == izb  # only the start itself was timed


def test_spare_trials_go_to_more_starts_and_never_make_it_worse() -> None:
    """With trials to spare the search goes on from the next best starts: never above the two-start
    answer, and a budget the two starts use up gives exactly that answer."""
    inst = Instance.from_problem(loop_problem(4, 8, 2, 5))
    izb = interleaved_zb_order(inst)
    two, more = Trials(100_000), Trials(100_000)
    a = improve(inst, [izb], two, spare=2)
    b = improve(inst, [izb], more, spare=8)
    assert a is not None and b is not None and b.objective <= a.objective + 1e-9
    assert 100_000 - more.left >= 100_000 - two.left
    used = 100_000 - two.left
    short = improve(inst, [izb], Trials(used), spare=8)
    assert short is not None and short.order == a.order

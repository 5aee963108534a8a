"""``v-memory``: valid V orders within the cap at 1p and above, below ZB-V where the schedule has slack."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesched.solver import Instance, NotApplicableError, Problem, SolveOptions, solve
from pipesched.solver.core.metrics import peak_memory
from pipesched.solver.core.schedule import Schedule
from pipesched.solver.heuristics.classic.zb_v import zb_v_order
from pipesched.solver.heuristics.trials import Trials
from pipesched.solver.heuristics.v_memory import (
    POLICIES,
    VMPolicy,
    deferred_w_order,
    vm_candidates,
    vm_order,
)
from pipesched.solver.heuristics.v_search import improve
from pipesched.solver.timing.finalize import finalize
from pipesched.solver.timing.retime import Incumbent, compact
from pipesched.solver.timing.simulate import DeadlockError
from pipesched.solver.timing.validate import validate

#: The zero-bubble paper's 1.5B profile (Table 6), halved per chunk, and its memory per chunk.
HALF = {"forward": 9.261, "backward_input": 9.043, "backward_weight": 4.669, "comm": 0.601}
MB, MW = 100608.0, 36864.0


def paper_v(p: int, m: int, cap: float, objective: str = "stage_span", **costs: float) -> Problem:
    return Problem(devices=p, microbatches=m, stages_per_device=2, placement="v", objective=objective,
                   costs={**HALF, **costs},
                   memory={"forward": MB, "backward_input": MW - MB, "backward_weight": -MW,
                           "limit": cap * 2 * p * MB})


def _within_cap(inst: Instance, order: list) -> bool:
    return all(peak <= cap * (1 + 1e-9) for peak, cap in zip(peak_memory(inst, order), inst.limit, strict=True))


def _schedule(problem: Problem, inst: Instance, order: list) -> Schedule:
    return finalize(problem, "test", compact(inst, order), solve_time_s=0.0, inst=inst)


@settings(max_examples=30, deadline=None)
@given(p=st.integers(1, 4), m=st.integers(1, 9), cap=st.sampled_from([1.0, 1.25, 1.5, 2.0]),
       objective=st.sampled_from(["makespan", "stage_span"]), w=st.sampled_from([2.0, 4.669, 9.0]),
       comm=st.sampled_from([0.0, 0.601]))
def test_every_order_is_valid_within_the_cap_or_cleanly_stuck(p: int, m: int, cap: float, objective: str,
                                                              w: float, comm: float) -> None:
    problem = paper_v(p, m, cap, objective, backward_weight=w, comm=comm)
    inst = Instance.from_problem(problem)
    for policy in (*POLICIES, VMPolicy(), VMPolicy(("F0", "F1", "B0", "B1"), 0, "fits", None, False)):
        try:
            order = vm_order(inst, policy)
        except DeadlockError:
            continue
        assert _within_cap(inst, order) and not validate(_schedule(problem, inst, order))
    base = zb_v_order(inst)
    if _within_cap(inst, base):  # ZB-V fits: its F/B sequence with the Ws re-placed fits too, never stuck
        for rule, hold, jump in (("fits", None, False), ("eager", 1, True)):
            order = deferred_w_order(inst, base, rule, hold, jump)
            assert _within_cap(inst, order) and not validate(_schedule(problem, inst, order))
    schedule = solve(problem, "v-memory")  # finalize validates: memory, dependencies, overlaps
    assert max(schedule.peak_memory) <= problem.memory.limit * (1 + 1e-9)


def test_the_search_never_worsens_and_keeps_the_cap() -> None:
    inst = Instance.from_problem(paper_v(4, 8, 1.0))
    start = Incumbent.of(inst, deferred_w_order(inst, zb_v_order(inst)))
    better = improve(inst, start, Trials(200))
    assert better.objective <= start.objective and _within_cap(inst, better.order)
    assert compact(inst, better.order) == better.start


def test_strictly_below_zb_v_at_one_p_on_the_smallest_case() -> None:
    """p = 2, m = 4, cap 1p: ZB-V's 194.93 against 191.68 (the ILP's best after 60 s)."""
    problem = paper_v(2, 4, 1.0)
    ours, zbv = solve(problem, "v-memory"), solve(problem, "zb-v")
    assert ours.objective_value < zbv.objective_value - 1.0
    assert not validate(ours)


@pytest.mark.parametrize("p", [4, 8])
def test_never_worse_than_zb_v_at_tight_caps(p: int) -> None:
    for cap in (1.0, 1.5):
        problem = paper_v(p, 2 * p, cap)
        assert solve(problem, "v-memory").objective_value <= solve(problem, "zb-v").objective_value + 1e-9


def test_a_cap_below_one_microbatch_is_refused_cleanly() -> None:
    problem = paper_v(3, 6, 0.3)  # under 2 chunk activations: no order can run a microbatch through a device
    assert vm_candidates(Instance.from_problem(problem)) == []
    with pytest.raises(NotApplicableError):
        solve(problem, "v-memory")


def test_other_placements_are_refused() -> None:
    problem = Problem(devices=2, microbatches=4, stages_per_device=2, placement="loop", costs=HALF)
    with pytest.raises(NotApplicableError):
        solve(problem, "v-memory")


def test_auto_holds_v_memorys_answer_at_one_p() -> None:
    """``auto`` runs the method's orders with the method's own search budget (a count of trials)."""
    problem = paper_v(4, 8, 1.0)
    ours = solve(problem, "v-memory")
    got = solve(problem, "auto", SolveOptions(time_limit_s=2.0))
    assert got.objective_value <= ours.objective_value + 1e-9 < solve(problem, "zb-v").objective_value


@pytest.mark.exclusive  # the V orders run while they fit auto's wall deadline: a busy neighbour cuts them
def test_auto_holds_v_memorys_answer_above_the_full_model_size() -> None:
    """Above ``FULL_MODEL_OPS`` (4608 ops here) the grid alone is charged more than the heuristics'
    share; the V orders run anyway while they fit the method's deadline (a held-out case of 7200 ops
    had ``auto`` 3.6% worse than ``v-memory``, ending at 4.6 s of 10)."""
    problem = paper_v(16, 48, 1.0)
    ours = solve(problem, "v-memory", SolveOptions(time_limit_s=10.0))
    got = solve(problem, "auto", SolveOptions(time_limit_s=10.0))
    assert got.objective_value <= ours.objective_value + 1e-9


def test_the_chain_search_beats_zb_v_at_one_p() -> None:
    """6.2B costs halved per chunk, p = 3, m = 4, cap 1p: the ILP proves 334.98; ZB-V's order and the
    first search stop at 340.33, the critical-chain search from the other orders gets below that. With the
    list-scheduler set before its re-derivation (benchmarks/tune_list_policies.py) it reached the optimum;
    with the re-derived set it stops at 339.14 (the rule chose the set, not this case)."""
    problem = Problem(devices=3, microbatches=4, stages_per_device=2, placement="v", objective="stage_span",
                      costs={"forward": 14.859, "backward_input": 14.722, "backward_weight": 9.9635, "comm": 0.527},
                      memory={"forward": 151552.0, "backward_input": 65536.0 - 151552.0, "backward_weight": -65536.0,
                              "limit": 6 * 151552.0})
    ours = solve(problem, "v-memory")
    assert 334.98 - 0.01 <= ours.objective_value <= 339.14 + 0.01
    assert not validate(ours)

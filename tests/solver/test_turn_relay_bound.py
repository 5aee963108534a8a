"""The turn relay (:mod:`pipesched.solver.bounds.turn_relay`) never exceeds an optimum, its count holds on
real schedules, and it closes most of the V gap at a cap of 1p (issue 12, target 2).

Why these cases: the bound counts the work a V device must have run when its last chunk-1 forward
starts, so the cases need caps that hold one to a few microbatches in flight on the turn device; the
zero-bubble profiles halved per chunk (1p, 0.75p), fused and split backward, uneven costs and memory,
both objectives. Optima come from HiGHS (``--method ilp --backend highs``, proven) and, for the tiniest,
from brute force over every per-device order (``bruteforce.py``); neither calls the bounds.
"""

from __future__ import annotations

import itertools

import pytest
from bruteforce import optimum

from pipesched.solver import Instance, Problem, solve
from pipesched.solver.bounds.combinatorial import combinatorial_bound
from pipesched.solver.bounds.turn_relay import _done_before_last_turn, owed_work, turn_relay_bound

#: The 1.5B profile of ``benchmarks/cases.py`` halved per chunk; memory in units of one chunk's F.
PAPER = {"forward": 9.261, "backward_input": 9.043, "backward_weight": 4.6685, "comm": 0.601}
AFTER_B = 36864 / 100608
UNEVEN = {"forward": [1.0, 2.0, 1.5, 1.0], "backward_input": [1.0, 2.0, 1.0, 1.5], "backward_weight": 0.5,
          "comm": 0.25}
UNEVEN_MEM = {"forward": [1.0, 0.5, 1.5, 1.0], "backward_input": [-0.5, -0.25, -1.0, -0.5],
              "backward_weight": [-0.5, -0.25, -0.5, -0.5]}


def _v(p: int, m: int, costs: dict, chunks: float, objective: str = "stage_span", split: bool = True,
       memory: dict | None = None) -> Problem:
    mem = memory or {"forward": 1.0, "backward_input": AFTER_B - 1.0, "backward_weight": -AFTER_B}
    return Problem(devices=p, microbatches=m, stages_per_device=2, placement="v", objective=objective,
                   split_backward=split, costs=costs, memory={**mem, "limit": chunks})


def test_the_bound_applies_to_the_paper_cases_that_test_v_bound_tight_proves() -> None:
    """Those HiGHS-proven V optima (``test_v_bound_tight.py``, which checks this bound never exceeds them)
    include caps where the turn relay is the one that binds: it must apply there, not return 0."""
    fused = _v(2, 3, PAPER, 4, split=False, memory={"forward": 1.0, "backward_input": -1.0, "backward_weight": 0.0})
    for problem in (_v(2, 3, PAPER, 3), fused):
        assert turn_relay_bound(Instance.from_problem(problem)) > 0


@pytest.mark.parametrize(("m", "cap", "objective"), [(2, 2.0, "stage_span"), (2, 3.0, "makespan"),
                                                     (2, 2.5, "stage_span"), (3, 2.0, "makespan")])
def test_turn_relay_never_exceeds_the_brute_forced_optimum(m: int, cap: float, objective: str) -> None:
    """p = 2 with uneven costs and memory, caps from one microbatch up: every per-device order tried."""
    problem = _v(2, m, UNEVEN, cap, objective, memory=UNEVEN_MEM)
    value = turn_relay_bound(Instance.from_problem(problem))
    assert 0 < value <= optimum(problem) + 1e-9


def test_the_count_holds_on_every_schedule_the_heuristics_find() -> None:
    """What the bound assumes of *every* valid schedule, checked on real ones: when device ``e``'s last
    chunk-1 forward starts, ``e`` has already run at least ``_done_before_last_turn`` of work."""
    problems = [_v(4, 12, PAPER, 8), _v(3, 7, PAPER, 6), _v(2, 5, PAPER, 3), _v(2, 6, UNEVEN, 2.5, memory=UNEVEN_MEM)]
    checked = 0
    for problem, method in itertools.product(problems, ("v-memory", "zb-v-greedy")):
        inst = Instance.from_problem(problem)
        sched = solve(problem, method)
        for e in range(inst.devices):
            t = 2 * inst.devices - 1 - e
            tau = max(o.start for o in sched.ops if o.kind == "F" and o.stage == t)
            done = sum(o.end - o.start for o in sched.ops if o.device == e and o.end <= tau + 1e-9)
            assert done >= _done_before_last_turn(inst, e, inst.device_work()[e]) - 1e-6, f"{method} p{inst.devices} device {e}"
            checked += 1
    assert checked == 2 * (4 + 3 + 2 + 2)


def test_owed_work_is_at_least_every_integer_mix() -> None:
    """The LP over the states bounds every integer choice of states for the other microbatches."""
    states = [(2.0, 27.4), (1.37, 18.4), (1.0, 13.7), (0.73, 9.3), (0.37, 4.7), (0.0, 0.0)]
    for room, count in [(6.0, 3), (6.0, 11), (2.0, 5), (0.5, 4), (3.3, 2)]:
        best = max(sum(states[k][1] for k in pick) for n in range(count + 1)
                   for pick in itertools.combinations_with_replacement(range(len(states)), n)
                   if sum(states[k][0] for k in pick) <= room)
        assert owed_work(states, room, count) >= best - 1e-9
    assert owed_work([(2.0, 27.4)], 6.0, 11) == pytest.approx(3 * 27.4)
    assert owed_work([(0.0, 5.0)], 1.0, 4) == pytest.approx(20.0)  # holding nothing: the count caps it


def test_turn_relay_closes_most_of_the_1p_gap_at_p4() -> None:
    """1.5B, p = 4, m = 12 at 1p: the turn device (3) holds three microbatches besides the last one, so at
    its last chunk-1 forward it has run all but 3 (B + W) of the others' backward work: 29.59 (trip to
    it) + 432.38 + 119.46 (the last microbatch's way up and back) = 581.43, where the one-device bounds
    stop at 554.95 and ``v-memory`` finds 584.39."""
    inst = Instance.from_problem(_v(4, 12, PAPER, 8))
    assert combinatorial_bound(inst) == pytest.approx(581.43, abs=0.01)
    assert turn_relay_bound(inst) == pytest.approx(581.43, abs=0.01)


def test_turn_relay_is_zero_off_the_v_placement_and_uncapped() -> None:
    loop = Problem(devices=2, microbatches=4, stages_per_device=2, placement="loop", costs=PAPER,
                   memory={"forward": 1.0, "backward_input": AFTER_B - 1.0, "backward_weight": -AFTER_B, "limit": 4})
    assert turn_relay_bound(Instance.from_problem(loop)) == 0.0
    uncapped = Problem(devices=2, microbatches=4, stages_per_device=2, placement="v", costs=PAPER)
    assert turn_relay_bound(Instance.from_problem(uncapped)) == 0.0

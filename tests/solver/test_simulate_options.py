"""One simulator: F&B pairs and shared cores are options of :func:`simulate`, and each reduces to the
plain simulation where it should (no pair formed; a core per rank)."""

from __future__ import annotations

import pytest

from pipesched.solver import Instance, Problem, solve
from pipesched.solver.timing.simulate import DeadlockError, Sharing, simulate

PROBLEMS = [
    Problem(devices=4, microbatches=8, costs={"forward": [1, 2, 1, 3], "comm": 0.25}),
    Problem(devices=2, microbatches=4, stages_per_device=2, placement="v", costs={"backward_input": 2}),
    Problem(devices=4, microbatches=8, stages_per_device=2, placement="dual", costs={"overlap_fb": 0.6, "comm": 0.1}),
]


@pytest.mark.parametrize("problem", PROBLEMS, ids=["loop", "v", "dual"])
def test_a_core_per_rank_replays_the_plain_simulation(problem: Problem) -> None:
    inst = Instance.from_problem(problem)
    order = solve(problem, "greedy").order()
    plain_ends: dict = {}
    plain = simulate(inst, order, ends=plain_ends)
    ends: dict = {}
    shared = simulate(inst, order, sharing=Sharing(lambda k: 1.0), ends=ends)
    assert shared.keys() == plain.keys()
    assert all(abs(shared[op] - plain[op]) <= 1e-9 * max(1.0, plain[op]) for op in plain)
    assert all(abs(ends[op] - plain_ends[op]) <= 1e-9 * max(1.0, plain_ends[op]) for op in plain)
    assert all(plain_ends[op] == pytest.approx(t + inst.cost(op)) for op, t in plain.items())


def test_half_a_core_each_doubles_a_lone_chain_and_a_handoff_delays_every_crossing() -> None:
    problem = Problem(devices=2, microbatches=1, split_backward=False)  # F0 F1 B1 B0: one op at a time
    inst = Instance.from_problem(problem)
    order = solve(problem, "gpipe").order()
    ends: dict = {}
    simulate(inst, order, sharing=Sharing(lambda k: 0.5), ends=ends)
    assert max(ends.values()) == pytest.approx(2 * (1 + 1 + 2 + 2))  # F, F, fused B (1 + 1) twice, at half speed
    ends = {}
    simulate(inst, order, sharing=Sharing(lambda k: 1.0, handoff=lambda j: 0.5), ends=ends)
    assert max(ends.values()) == pytest.approx(1 + 0.5 + 1 + 2 + 0.5 + 2)  # two device crossings


def test_pairs_run_as_one_op_and_no_pairs_is_the_plain_simulation() -> None:
    problem = PROBLEMS[2]
    inst = Instance.from_problem(problem)
    schedule = solve(problem, "dualpipe")
    from pipesched.solver.timing.pairs import timed_pairs

    pairs = timed_pairs(schedule.ops, inst)
    assert pairs
    start = simulate(inst, schedule.order(), pairs=pairs)
    assert {o.id: o.start for o in schedule.ops} == pytest.approx(start)
    for f, b in ((f, b) for f, b in pairs.items() if f.kind == "F"):
        assert start[f] == start[b]
    plain = simulate(inst, schedule.order())
    assert simulate(inst, schedule.order(), pairs={}) == plain


def test_the_options_refuse_what_they_cannot_time() -> None:
    inst = Instance.from_problem(PROBLEMS[0])
    order = solve(PROBLEMS[0], "gpipe").order()
    f, b = order[0][0], order[0][-1]
    with pytest.raises(ValueError, match="overlap_fb"):
        simulate(inst, order, pairs={f: b, b: f})
    dual = Instance.from_problem(PROBLEMS[2])
    dual_order = solve(PROBLEMS[2], "greedy").order()
    with pytest.raises(ValueError, match="no pairs"):
        simulate(dual, dual_order, pairs={dual_order[0][0]: dual_order[0][1]}, sharing=Sharing(lambda k: 1.0))
    with pytest.raises(DeadlockError):
        simulate(inst, [list(reversed(ops)) for ops in order], sharing=Sharing(lambda k: 1.0))


def test_a_paired_schedule_reports_the_transient_of_its_b() -> None:
    """An F&B pair's B holds its recompute transient while the pair runs: the reported peak counts it
    (the validator does), so dualpipe-v answers problems with both pairs and transients."""
    problem = Problem.model_validate({
        "devices": 2, "microbatches": 4, "stages_per_device": 2, "placement": "v",
        "costs": {"forward": 1, "backward_input": 1.5, "backward_weight": 0.5, "overlap_fb": 0.7},
        "memory": {"forward": 1, "backward_input": -0.5, "backward_weight": -0.5,
                   "backward_input_transient": [0, 2, 0, 0]}})
    schedule = solve(problem, "dualpipe-v")
    from pipesched.solver import validate

    assert validate(schedule) == []
    assert max(schedule.peak_memory) == 7.0

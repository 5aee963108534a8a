"""The lowered per-rank plans and the torch CSV export, checked without any process group."""

from __future__ import annotations

import csv
import io

import pytest
from torch.distributed.pipelining.schedules import _Action, _validate_schedule

from pipesched.runtime.replay.plan import Compute, PostRecv, Send, rank_plan
from pipesched.solver import Instance, Problem, Schedule, solve
from pipesched.solver.formats.torch_csv import rank_programs, to_torch_csv

CASES = [
    (Problem(devices=2, microbatches=3), "1f1b"),
    (Problem(devices=4, microbatches=6), "zb-h2"),
    (Problem(devices=3, microbatches=4, stages_per_device=2, placement="v"), "zb-v"),
    (Problem(devices=2, microbatches=4, stages_per_device=2), "interleaved-1f1b"),
    (Problem(devices=3, microbatches=3, split_backward=False), "gpipe"),
]


def _schedule(problem: Problem, method: str) -> Schedule:
    return solve(problem, method)


@pytest.mark.parametrize(("problem", "method"), CASES, ids=[c[1] for c in CASES])
def test_every_rank_pair_issues_its_messages_in_the_same_order(problem: Problem, method: str) -> None:
    schedule = _schedule(problem, method)
    plans = [rank_plan(schedule, r) for r in range(problem.devices)]
    for r in range(problem.devices):
        for q in range(problem.devices):
            if r == q:
                continue
            on_r = [i.message for i in plans[r] if isinstance(i, (Send, PostRecv)) and q in (i.message.src, i.message.dst)]
            on_q = [i.message for i in plans[q] if isinstance(i, (Send, PostRecv)) and r in (i.message.src, i.message.dst)]
            assert on_r == on_q


@pytest.mark.parametrize(("problem", "method"), CASES, ids=[c[1] for c in CASES])
def test_receives_are_posted_before_the_op_that_needs_them_and_each_op_runs_once(problem: Problem, method: str) -> None:
    schedule = _schedule(problem, method)
    for r in range(problem.devices):
        posted, done = set(), []
        for instr in rank_plan(schedule, r):
            if isinstance(instr, PostRecv):
                posted.add(instr.message.consumer)
            elif isinstance(instr, Compute):
                done.append(instr.op)
        assert sorted(done) == sorted(rank_programs(schedule)[r])
        for instr in rank_plan(schedule, r):
            if isinstance(instr, PostRecv):
                plan = rank_plan(schedule, r)
                assert plan.index(instr) < plan.index(Compute(instr.message.consumer))


@pytest.mark.parametrize(("problem", "method"), CASES, ids=[c[1] for c in CASES])
def test_torch_csv_is_accepted_by_torchs_schedule_validator(problem: Problem, method: str) -> None:
    schedule = _schedule(problem, method)
    text = to_torch_csv(schedule)
    rows = list(csv.reader(io.StringIO(text)))
    assert len(rows) == problem.devices
    actions = {r: [_Action.from_str(a) for a in row] for r, row in enumerate(rows)}
    stage_to_rank = _validate_schedule(actions, problem.devices, problem.num_stages, problem.microbatches)
    assert stage_to_rank == {o.stage: o.device for o in schedule.ops}
    kinds = {a.computation_type.value for row in actions.values() for a in row}
    assert kinds == ({"F", "I", "W"} if problem.split_backward else {"F", "B"})


def test_zero_cost_ties_are_ordered_by_dependency_not_by_name() -> None:
    problem = Problem(devices=1, microbatches=1, stages_per_device=2,
                      costs={"forward": 0.0, "backward_input": 0.0, "backward_weight": 0.0})
    schedule = solve(problem, "gpipe")
    inst = Instance.from_problem(problem)
    (program,) = rank_programs(schedule)
    for k, op in enumerate(program):
        assert all(pred in program[:k] for pred, _ in inst.predecessors(op)), program
    # sorting by name would put B (and I) before F at the last stage
    assert to_torch_csv(schedule).startswith("0F0,1F0,1I0,")


def test_exporting_a_schedule_without_ops_says_why() -> None:
    from pipesched.solver import no_schedule

    empty = no_schedule(Problem(devices=2, microbatches=2), "cpsat", "infeasible", "memory limit too small")
    with pytest.raises(ValueError, match="memory limit too small"):
        to_torch_csv(empty)

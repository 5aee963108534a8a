"""A chunk of sweep items in one solver process: every item answered in order (problems and plan
requests alike), an item that overruns its deadline is killed alone while the rest of the chunk
goes on in a fresh process; and how a Ray sweep sizes its chunks."""

from __future__ import annotations

import json

from pipesched.api.batch.chunks import ChunkRunner, Unit
from pipesched.api.batch.ray import FIRST_CHUNK, MAX_CHUNK, TASK_SECONDS, ChunkSizer
from pipesched.solver import Schedule, validate
from pipesched.solver.planning import Plan

#: Keeps CP-SAT busy for its whole time limit (as tests/scaleout/test_scaleout.py's HARD).
HARD = {"devices": 4, "stages_per_device": 2, "placement": "loop", "objective": "stage_span", "microbatches": 10,
        "costs": {"forward": [1.0, 1.3, 0.9, 1.1, 1.2, 0.8, 1.05, 1.15],
                  "backward_input": [1.1, 1.0, 1.2, 0.9, 1.3, 1.0, 1.1, 0.95],
                  "backward_weight": [0.7, 0.9, 0.8, 1.0, 0.6, 0.85, 0.75, 0.9], "comm": 0.1},
        "memory": {"forward": 1.0, "backward_input": 0.0, "backward_weight": -1.0, "limit": 5}}


def solve_unit(problem: dict, method: str = "greedy", time_limit_s: float = 5.0) -> Unit:
    return "solve", (json.dumps(problem), method, time_limit_s, None, 1)


def test_a_chunk_answers_every_item_in_order_from_one_process() -> None:
    runner = ChunkRunner(kill_grace_s=5.0)
    problems = [{"devices": d, "microbatches": m} for d, m in ((2, 4), (4, 8), (2, 6))]
    results = runner.run([solve_unit(p) for p in problems] + [solve_unit(problems[0], "no-such-method")], [5.0] * 4)
    assert [r[0] for r in results] == ["ok", "ok", "ok", "not_applicable"]
    for problem, (_, payload, seconds) in zip(problems, results, strict=False):
        schedule = Schedule.model_validate_json(payload)
        assert (schedule.problem.devices, schedule.problem.microbatches) == (problem["devices"], problem["microbatches"])
        assert validate(schedule) == [] and seconds > 0
    assert "unknown method" in results[3][1]


def test_an_item_past_its_deadline_is_killed_alone_and_the_chunk_goes_on() -> None:
    runner = ChunkRunner(kill_grace_s=0.5)
    units = [solve_unit({"devices": 2, "microbatches": 4}),
             solve_unit(HARD, "cpsat", 30.0),  # solves for 30 s; its deadline here is 0.1 + 0.5 s
             solve_unit({"devices": 2, "microbatches": 6})]
    results = runner.run(units, [30.0, 0.1, 30.0])
    assert [r[0] for r in results] == ["ok", "killed", "ok"]
    assert "hard wall-clock limit of 0.6 s" in results[1][1]
    assert Schedule.model_validate_json(results[2][1]).problem.microbatches == 6
    assert not runner._live  # noqa: SLF001 (every chunk process was reaped)


def test_a_chunk_plans_a_model_beside_a_problem() -> None:
    model = {"layers": [{"name": "block", "repeat": 4, "forward": 1.0, "backward_input": 1.0, "backward_weight": 1.0,
                         "memory": {"forward": 1.0, "backward_input": -0.5, "backward_weight": -0.5},
                         "static": 1.0, "output": 0.2},
                        {"name": "head", "forward": 3.0, "backward_input": 3.0, "backward_weight": 3.0,
                         "memory": {"forward": 2.0, "backward_input": -1.0, "backward_weight": -1.0}, "static": 1.0}]}
    cluster = {"devices": 2, "microbatches": 4, "memory_per_device": 30.0}
    units: list[Unit] = [("plan", (json.dumps(model), json.dumps(cluster), "greedy", 5.0, None)),
                         solve_unit({"devices": 2, "microbatches": 4})]
    (p_outcome, p_json, _), (s_outcome, _, _) = ChunkRunner(kill_grace_s=5.0).run(units, [5.0, 5.0])
    assert (p_outcome, s_outcome) == ("ok", "ok")
    plan = Plan.model_validate_json(p_json)
    assert plan.schedule is not None and validate(plan.schedule) == [] and plan.exports.torch_csv
    assert plan.stages[0].layers[0] == 0 and plan.stages[-1].layers[1] == 5  # the 5 layers, split


def test_chunks_follow_the_measured_solve_time_and_shrink_to_an_even_share_at_the_end() -> None:
    sizer = ChunkSizer(slots=4)
    assert sizer.next(left=1000) == FIRST_CHUNK  # nothing measured yet
    for _ in range(10):
        sizer.observe(TASK_SECONDS / 10)
    assert sizer.next(left=1000) == 10  # about TASK_SECONDS of work
    assert sizer.next(left=12) == 3  # the last 12 items: one share per slot
    for _ in range(30):
        sizer.observe(TASK_SECONDS * 4)
    assert sizer.next(left=1000) == 1  # long solves: one a task
    fast = ChunkSizer(slots=1)
    fast.observe(1e-6)
    assert fast.next(left=1000) == MAX_CHUNK

"""Our executor on real gloo process groups: every method's schedule gives the full-batch gradients.

One spawned group per world size replays every schedule (two steps each, so the shapes agreed on
the first step are reused on the second); each test then checks one schedule's gradients.
"""

from __future__ import annotations

import pytest
from runtime_limits import GROUP_TIMEOUT_S

from pipesched.runtime.check import TOLERANCE, grad_diff, make_problem, replay_rank
from pipesched.runtime.launch import run_ranks
from pipesched.solver import Schedule, SolveOptions, solve

BATCH = 9  # uneven: microbatches of 3, 2, 2, 2 -> loss scaling must use each microbatch's share

# (method, stages_per_device, split_backward)
CASES = [
    ("gpipe", 1, True), ("1f1b", 1, True), ("1f1b", 1, False), ("interleaved-1f1b", 2, True),
    ("zb-h1", 1, True), ("zb-h2", 1, True), ("zb-v", 2, True), ("cpsat", 1, True),
    ("looped-bfs", 2, True), ("looped-bfs", 2, False),
]


def _solve(world: int, method: str, v: int, split: bool) -> Schedule:
    problem = make_problem(world, method, 4, v, split)
    if method == "cpsat":  # uneven stage costs so the solver's schedule is not a textbook one
        problem = problem.model_copy(update={"costs": problem.costs.model_copy(
            update={"forward": [1.0 + s for s in range(problem.num_stages)]})})
        problem = type(problem).model_validate(problem.model_dump())
    return solve(problem, method, SolveOptions(time_limit_s=3.0))


def _ids(world: int) -> list[str]:
    return [f"p{world}-{m}-v{v}-{'split' if s else 'fused'}" for m, v, s in CASES]


@pytest.fixture(scope="module", params=[2, 4], ids=["p2", "p4"])
def replayed(request: pytest.FixtureRequest) -> tuple[int, list[Schedule], list[list[dict]]]:
    world = request.param
    schedules = [_solve(world, *case) for case in CASES]
    results = run_ranks(replay_rank, world, [s.model_dump_json() for s in schedules], BATCH, 2,
                        timeout_s=GROUP_TIMEOUT_S)
    return world, schedules, [r.value for r in results]


@pytest.mark.parametrize("case", range(len(CASES)), ids=[c[0] + ("" if c[2] else "-fused") for c in CASES])
def test_gradients_match_the_full_batch_reference(replayed, case: int) -> None:
    world, schedules, per_rank = replayed
    diff = grad_diff(schedules[case], [r[case] for r in per_rank], BATCH)
    assert diff <= TOLERANCE, f"{_ids(world)[case]}: max grad diff {diff:g}"

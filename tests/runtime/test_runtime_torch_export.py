"""The torch-csv export runs in torch's own _PipelineScheduleRuntime (gloo) with the right gradients."""

from __future__ import annotations

import pytest
from runtime_limits import GROUP_TIMEOUT_S

from pipesched.runtime.check import TOLERANCE, grad_diff, make_problem, torch_replay_rank
from pipesched.runtime.launch import run_ranks
from pipesched.solver import Schedule, SolveOptions, solve

BATCH = 8  # torch's REDUCE_GRAD divides by m: exact for equal microbatches only

CASES = [("zb-h1", 1, True), ("zb-v", 2, True), ("interleaved-1f1b", 2, True), ("1f1b", 1, False),
         ("cpsat", 1, True), ("looped-bfs", 2, True)]


@pytest.fixture(scope="module")
def replayed() -> tuple[list[Schedule], list[list[dict]]]:
    schedules = [solve(make_problem(2, m, 4, v, split), m, SolveOptions(time_limit_s=3.0)) for m, v, split in CASES]
    results = run_ranks(torch_replay_rank, 2, [s.model_dump_json() for s in schedules], BATCH,
                        timeout_s=GROUP_TIMEOUT_S)
    return schedules, [r.value for r in results]


@pytest.mark.parametrize("case", range(len(CASES)), ids=[c[0] + ("" if c[2] else "-fused") for c in CASES])
def test_torch_runtime_on_the_exported_csv_matches_the_reference(replayed, case: int) -> None:
    schedules, per_rank = replayed
    diff = grad_diff(schedules[case], [r[case] for r in per_rank], BATCH)
    assert diff <= TOLERANCE, f"{CASES[case]}: max grad diff {diff:g}"

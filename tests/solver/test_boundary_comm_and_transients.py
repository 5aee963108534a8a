"""Per-boundary comm and recompute transients in Problem, every method and the validator (issue 10)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pipesched.solver import Problem, SolveOptions, solve, validate
from pipesched.solver.core.canonical import problem_key
from pipesched.solver.core.instance import Instance
from pipesched.solver.formats.memory_track import memory_tracks
from pipesched.solver.timing.finalize import no_schedule

#: Three stages, one microbatch: the chain is F0 F1 F2 B2 B1 B0 W0 with lags 0.5 and 2 at the two boundaries.
CHAIN = {"devices": 3, "microbatches": 1, "costs": {"comm": [0.5, 2.0]}}


@pytest.mark.parametrize("method", ["gpipe", "1f1b", "greedy", "zb-h1", "cpsat", "ilp", "auto"])
def test_every_method_waits_each_boundarys_own_comm(method: str) -> None:
    schedule = solve(Problem.model_validate(CHAIN), method, SolveOptions(time_limit_s=5))
    assert validate(schedule) == []
    start = {(o.kind, o.stage): o.start for o in schedule.ops}
    assert start[("F", 1)] >= start[("F", 0)] + 1 + 0.5 - 1e-9
    assert start[("F", 2)] >= start[("F", 1)] + 1 + 2.0 - 1e-9
    assert start[("B", 0)] >= start[("B", 1)] + 1 + 0.5 - 1e-9
    # F, B of three stages, W of the first, and the lags both ways: 7 + 2 * (0.5 + 2)
    assert schedule.makespan >= 12 - 1e-9
    if method == "cpsat":
        assert schedule.makespan == pytest.approx(12) and schedule.status == "optimal"


def test_the_validator_names_the_boundary_whose_comm_is_not_waited() -> None:
    schedule = solve(Problem.model_validate(CHAIN), "gpipe")
    early = [o.model_copy(update={"start": o.start - 1.5, "end": o.end - 1.5})
             if (o.kind, o.stage) == ("F", 2) else o for o in schedule.ops]
    errors = validate(schedule.model_copy(update={"ops": early}))
    assert any("F" in e and "(+comm 2)" in e for e in errors), errors


def test_a_comm_list_must_have_one_entry_per_boundary() -> None:
    with pytest.raises(ValidationError, match=r"costs.comm has 3 entries but the model's 3 stages have 2 boundaries"):
        Problem.model_validate({**CHAIN, "costs": {"comm": [1, 1, 1]}})
    with pytest.raises(ValidationError, match=r"costs.comm\[1\] must be >= 0"):
        Problem.model_validate({**CHAIN, "costs": {"comm": [1, -1]}})


def test_equal_comms_or_a_zero_transient_keep_the_old_cache_key() -> None:
    plain = Problem(devices=3, microbatches=4, costs={"comm": 1.0})
    assert problem_key(Problem(devices=3, microbatches=4, costs={"comm": [1.0, 1]})) == problem_key(plain)
    assert problem_key(plain.model_copy(update={"memory": plain.memory.model_copy(
        update={"backward_input_transient": 0.0})})) == problem_key(plain)
    with_transient = Problem(devices=3, microbatches=4, costs={"comm": 1.0},
                             memory={"backward_input_transient": [0.0, 0.5, 0.0]})
    assert problem_key(with_transient) != problem_key(plain)


#: Two devices; stage 1's B re-materialises 3 units of activations while it runs.
TRANSIENT = {"devices": 2, "microbatches": 2, "memory": {"backward_input_transient": [0.0, 3.0]}}


def test_a_transient_counts_in_the_peak_while_its_b_runs() -> None:
    schedule = solve(Problem.model_validate(TRANSIENT), "gpipe")
    assert validate(schedule) == []
    # device 1 runs F F B B W W: two activations held (F +1 each), then B adds its transient on top
    assert schedule.peak_memory == [2.0, 5.0]
    assert [t.peak for t in memory_tracks(schedule)] == schedule.peak_memory


def test_the_validator_refuses_a_schedule_whose_transient_breaks_the_limit() -> None:
    schedule = solve(Problem.model_validate(TRANSIENT), "gpipe")
    capped = Problem.model_validate({**TRANSIENT, "memory": {**TRANSIENT["memory"], "limit": 4.0}})
    errors = validate(schedule.model_copy(update={"problem": capped}))
    assert "device 1: activation memory peaks at 5, above its limit 4" in errors


@pytest.mark.parametrize("method", ["greedy", "1f1b", "cpsat", "ilp", "auto"])
def test_methods_keep_the_transient_back_and_their_schedules_fit(method: str) -> None:
    problem = Problem.model_validate({**TRANSIENT, "microbatches": 4,
                                      "memory": {**TRANSIENT["memory"], "limit": 4.0}})
    schedule = solve(problem, method, SolveOptions(time_limit_s=5))
    assert validate(schedule) == [] and schedule.ops
    assert max(schedule.peak_memory) <= 4.0 + 1e-9
    inst = Instance.from_problem(problem)
    assert inst.limit == (4.0, 1.0) and inst.memory_cap(1) == 4.0  # device 1 keeps its transient, 3, back


def test_no_proof_under_the_kept_back_limits_is_reported_as_infeasible() -> None:
    problem = Problem.model_validate({**TRANSIENT, "memory": {**TRANSIENT["memory"], "limit": 4.0}})
    answer = no_schedule(problem, "cpsat", "infeasible", "no schedule fits")
    assert answer.status == "timeout" and "not proven" in (answer.reason or "")
    plain = Problem.model_validate({**TRANSIENT, "memory": {"limit": 4.0}})
    assert no_schedule(plain, "cpsat", "infeasible", "no schedule fits").status == "infeasible"

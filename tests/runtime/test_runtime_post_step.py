"""The twin-sum term of a dual step (calibration and prediction) and the replay's per-op timeline."""

from __future__ import annotations

import math

import pytest
from runtime_limits import GROUP_TIMEOUT_S

from pipesched.runtime.launch import LaunchError, run_ranks
from pipesched.runtime.profiling.post_step import dual_step_ms, twin_after, twin_ms
from pipesched.runtime.profiling.profile_layers import GIB, LinkProfile
from pipesched.runtime.transformer import TinyTransformer, config_dict, even_split, replay_rank
from pipesched.solver import Problem, solve

SIZES = (2**12, 2**16, 2**20)
COSTS = {"forward": [1.0, 1.5, 1.0, 2.0], "backward_input": [1.0, 1.0, 2.0, 1.5],
         "backward_weight": [0.5, 1.0, 0.5, 1.0], "comm": 0.25}


def _twin_rank(rank: int, world: int) -> LinkProfile:
    from pipesched.runtime.profiling.post_step import profile_twin_sum

    return profile_twin_sum(sizes=SIZES, repeats=2, warmup=1)


def test_every_pair_calibrates_at_once_and_every_rank_gets_the_same_fit() -> None:
    fits = [r.value for r in run_ranks(_twin_rank, 4, timeout_s=GROUP_TIMEOUT_S)]
    assert all(f == fits[0] for f in fits)
    assert [b for b, _ in fits[0].samples] == list(SIZES)
    assert all(math.isfinite(t) and t > 0 for _, t in fits[0].samples)
    assert fits[0].latency_ms >= 0


def test_an_odd_group_is_refused_naming_the_pairs() -> None:
    results = run_ranks(_twin_rank, 3, timeout_s=GROUP_TIMEOUT_S, check=False)
    assert all(not r.ok and "even number of ranks" in r.value for r in results)


def _dual() -> object:
    return solve(Problem(devices=4, microbatches=8, stages_per_device=2, placement="dual", costs=COSTS), "dualpipe")


def _ends(schedule: object) -> list[float]:
    ends = [0.0] * schedule.problem.devices
    for op in schedule.ops:
        ends[op.device] = max(ends[op.device], op.end)
    return ends


def test_a_free_sum_adds_nothing_and_a_fixed_one_adds_its_latency() -> None:
    schedule = _dual()
    assert dual_step_ms(schedule, [1e6] * 4, LinkProfile(0.0, None, ())) == pytest.approx(schedule.makespan)
    assert dual_step_ms(schedule, [1e6] * 4, LinkProfile(2.5, None, ())) == pytest.approx(schedule.makespan + 2.5)


def test_each_pair_pays_for_its_own_bytes_after_its_later_end() -> None:
    schedule = _dual()
    ends, p = _ends(schedule), 4
    twin = LinkProfile(0.0, 1.0 / 1024, ())  # 1 GiB per s
    for light in range(p // 2):  # all the bytes on one pair's model stages
        stage_bytes = [0.0] * p
        stage_bytes[light] = GIB / 1024  # 1 ms on its pair
        pair_end = max(ends[light], ends[p - 1 - light])
        got = dual_step_ms(schedule, stage_bytes, twin)
        assert got == pytest.approx(max(schedule.makespan, pair_end + twin_ms(twin, GIB / 1024)))
        assert got <= twin_after(schedule.makespan, stage_bytes, twin) + 1e-9


def test_a_replay_times_every_op_of_its_rank_and_the_twin_sum_of_a_dual_step() -> None:
    cfg = TinyTransformer()
    jobs, schedules = [], []
    for placement, method in (("dual", "dualpipe"), ("v", "zb-v")):
        problem = Problem(devices=2, microbatches=4, stages_per_device=2, placement=placement)
        schedules.append(solve(problem, method))
        stages = 2 if placement == "dual" else 4
        jobs.append((schedules[-1].model_dump_json(), even_split(cfg.layers + 2, stages)))
    ranks = [r.value for r in run_ranks(replay_rank, 2, jobs, config_dict(cfg), 8, 2, timeout_s=GROUP_TIMEOUT_S)]
    for j, schedule in enumerate(schedules):
        for rank, result in enumerate(ranks):
            got = result[j]
            mine = sorted((o.kind, o.stage, o.microbatch) for o in schedule.ops if o.device == rank)
            assert sorted(t[:3] for t in got["timeline"]) == mine
            previous_end = 0.0
            for *_, wait, start, end, cpu in sorted(got["timeline"], key=lambda t: t[4]):
                assert previous_end <= wait <= start <= end <= got["step_s"] and cpu >= 0  # one op at a time
                previous_end = end
            assert got["busy_s"] == pytest.approx(sum(t[5] - t[4] for t in got["timeline"]))
            assert (got["twin_s"] > 0) == (schedule.problem.placement == "dual")


def test_the_launcher_reports_a_failed_calibration() -> None:
    with pytest.raises(LaunchError, match="even number of ranks"):
        run_ranks(_twin_rank, 1, timeout_s=GROUP_TIMEOUT_S)

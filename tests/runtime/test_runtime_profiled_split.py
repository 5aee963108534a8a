"""profiled_split: a split chosen from whole-stage profiles of real torch layers, solved by auto, and
replayable (its gradients equal the unsplit model's)."""

from __future__ import annotations

import math

import pytest

from pipesched.runtime.launch import run_ranks
from pipesched.runtime.profiling.profile_layers import profile_layers
from pipesched.runtime.profiling.profiled_split import (
    all_splits,
    profile_segments,
    profiled_split,
    shared_cores_score,
)
from pipesched.runtime.transformer import (
    TinyTransformer,
    config_dict,
    even_split,
    lm_loss,
    reference_grads,
    replay_rank,
    sample_tokens,
    transformer_layers,
)
from pipesched.solver import Problem, from_order, solve, validate
from pipesched.solver.planning import Cluster, Link, candidate_splits

CFG = TinyTransformer(layers=3)  # embedding, 3 blocks, head: 5 layers


def _covers(split: list[tuple[int, int]], n: int, stages: int) -> bool:
    return (len(split) == stages and split[0][0] == 0 and split[-1][1] == n
            and all(a < b for a, b in split) and all(x[1] == y[0] for x, y in zip(split, split[1:], strict=False)))


def test_all_splits_are_every_contiguous_split() -> None:
    got = all_splits(6, 3)
    assert len(got) == math.comb(5, 2) == len({tuple(s) for s in got})
    assert all(_covers(s, 6, 3) for s in got)


def test_profile_segments_times_each_segment_every_round() -> None:
    layers = transformer_layers(CFG)
    x, y = sample_tokens(2, CFG)
    prof = profile_segments(layers, [(0, 2), (2, 5), (0, 2), (1, 3)], x, loss_fn=lm_loss, sample_target=y,
                            rounds=3, warmup=1)
    assert sorted(prof.costs) == [(0, 2), (1, 3), (2, 5)]
    assert all(len(prof.samples[s]) == 3 for s in prof.costs)
    assert all(t > 0 for s in prof.costs for t in (prof.costs[s][0], prof.costs[s][2]))
    assert prof.boundary_bytes[2] == 2 * CFG.seq * CFG.hidden * 4  # float32 activation (b, s, h)
    assert all(p.grad is None for layer in layers for p in layer.parameters())  # left as found
    costs = prof.stage_costs([(0, 2), (2, 5)], link=Link(latency=0.5, bandwidth=1.0), dispatch_ms=0.25,
                             contention=2.0)
    assert costs.forward[1] == pytest.approx(2.0 * prof.costs[(2, 5)][0] + 0.25)
    assert costs.comm == pytest.approx(0.5 + prof.boundary_bytes[2] / 2.0**30)
    with pytest.raises(ValueError, match="not non-empty ranges"):
        profile_segments(layers, [(3, 3)], x)


def test_profiled_split_picks_the_least_predicted_split_and_it_replays_exactly() -> None:
    layers = transformer_layers(CFG)
    x, y = sample_tokens(2, CFG)
    found = profiled_split(layers, x, 2, 4, loss_fn=lm_loss, sample_target=y, rounds=3, dispatch_ms=0.1,
                           time_limit_s=1.0, extra_segments=[(1, 4)])
    n = len(layers)
    assert found.enumerated and [c for c, _ in found.candidates] == all_splits(n, 2)
    assert found.split in all_splits(n, 2) and _covers(found.split, n, 2)
    assert found.schedule.makespan == min(ms for _, ms in found.candidates)
    assert found.predicted(even_split(n, 2)) >= found.schedule.makespan
    assert validate(found.schedule) == []
    assert (1, 4) in found.profile.costs  # the extra segment rides in the same rounds
    for s, seg in enumerate(found.split):  # the problem's costs are the segments' profiles + dispatch
        assert found.problem.costs.backward_weight[s] == pytest.approx(found.profile.costs[seg][2] + 0.1)
    # the chosen split and schedule run on real ranks and give the unsplit model's gradients
    batch = 4 * 2
    results = run_ranks(replay_rank, 2, [(found.schedule.model_dump_json(), found.split)], config_dict(CFG),
                        batch, 1, timeout_s=90)
    got = {k: g for r in results for k, g in r.value[0]["grads"].items()}
    ref = reference_grads(CFG, *sample_tokens(batch, CFG))
    assert set(got) == set(ref)
    assert max(float((got[k] - ref[k]).abs().max()) for k in ref) < 1e-5


def test_many_splits_take_the_planners_candidates() -> None:
    cfg = TinyTransformer(layers=6)
    layers = transformer_layers(cfg)
    x, y = sample_tokens(2, cfg)
    model = profile_layers(layers, x, loss_fn=lm_loss, sample_target=y, repeats=1, warmup=0)
    cands = candidate_splits(model, Cluster(devices=3, microbatches=4), 4)
    assert cands and len(cands) == len({tuple(c) for c in cands})
    assert all(_covers(c, len(layers), 3) for c in cands)
    assert [(0, 3), (3, 5), (5, 8)] in cands  # the uniform rule: 2 blocks a stage, embedding and head at the ends
    assert [(0, 2), (2, 5), (5, 8)] in cands  # and its one-layer boundary moves
    with pytest.raises(ValueError, match="max_enumerated"):
        profiled_split(layers, x, 3, 4, loss_fn=lm_loss, sample_target=y, max_enumerated=2)
    found = profiled_split(layers, x, 3, 4, loss_fn=lm_loss, sample_target=y, rounds=1, warmup=0,
                           max_enumerated=2, model=model, time_limit_s=0.5)
    assert not found.enumerated and [c for c, _ in found.candidates] == cands
    assert found.split in cands
    assert set(found.profile.costs) == {seg for c in cands for seg in c}
    # the schedule is the problem's: its order re-timed on that problem gives its makespan (a second
    # auto solve could differ: 0.5 s is short enough for a loaded machine's wall net to cut it)
    retimed = from_order(found.problem, found.schedule.method, found.schedule.order())
    assert retimed.makespan == pytest.approx(found.schedule.makespan, rel=1e-6)
    assert validate(retimed) == []


def test_a_score_ranks_the_solved_candidates() -> None:
    layers = transformer_layers(CFG)
    x, y = sample_tokens(2, CFG)
    seen: list[float] = []

    def worst(schedule, compute) -> float:  # ranks by the negated makespan: the slowest split wins
        seen.append(compute.forward[0])
        return -schedule.makespan

    found = profiled_split(layers, x, 2, 4, loss_fn=lm_loss, sample_target=y, rounds=1, warmup=0,
                           contention=3.0, dispatch_ms=1.0, time_limit_s=0.5, score=worst)
    assert found.schedule.makespan == max(s.makespan for s in found.schedules)
    assert [ms for _, ms in found.candidates] == [-s.makespan for s in found.schedules]
    # the score sees the costs without the contention factor (dispatch included)
    assert seen == pytest.approx([found.profile.costs[split[0]][0] + 1.0 for split, _ in found.candidates])
    # with a factor of 1 every rank has a core: shared cores re-time the schedule to its own makespan
    assert shared_cores_score(1.0)(found.schedule, found.schedule.problem.costs) == pytest.approx(
        found.schedule.makespan)
    assert shared_cores_score(2.0)(found.schedule, found.schedule.problem.costs) > found.schedule.makespan


def test_shared_cores_score_takes_a_factor_a_core_count_or_a_curve_only_one() -> None:
    schedule = solve(Problem(devices=4, microbatches=4), "1f1b")
    by_factor, by_cores = shared_cores_score(2.0), shared_cores_score(cores=2)
    by_curve = shared_cores_score(curve=[1.0, 1.0, 1.5, 2.0])  # the ideal curve of two cores
    costs = schedule.problem.costs
    assert by_factor(schedule, costs) == pytest.approx(by_cores(schedule, costs))
    assert by_curve(schedule, costs) == pytest.approx(by_cores(schedule, costs))
    with pytest.raises(ValueError, match="exactly one"):
        shared_cores_score(2.0, cores=2)
    with pytest.raises(ValueError, match="exactly one"):
        shared_cores_score(cores=2, curve=[1.0, 2.0])
    with pytest.raises(ValueError, match="exactly one"):
        shared_cores_score()

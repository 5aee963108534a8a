"""A split induces the Problem whose sums, limits and comm the docs promise; bad splits say why."""

from __future__ import annotations

import pytest
from planning_models import small_model

from pipesched.solver import solve, validate
from pipesched.solver.core.canonical import problem_key
from pipesched.solver.planning import Cluster, Model
from pipesched.solver.planning.induce import InfeasibleSplit, Split, induce, model_infeasibility
from pipesched.solver.planning.planner import plan


def test_stage_costs_and_deltas_are_sums_over_their_layers() -> None:
    layers = small_model().expanded()  # embed, block.0-3, head
    cluster = Cluster(devices=2, microbatches=4, link={"latency": 0.1, "bandwidth": 10.0})
    p = induce(layers, cluster, Split.of([0, 3, 6]), 4)
    assert p.costs.forward == [2.5, 4.0]
    assert p.costs.backward_input == [2.0, 4.0]
    assert p.costs.backward_weight == [2.5, 4.0]
    assert p.memory.forward == [4.5, 8.0]
    assert p.memory.backward_input == [-2.5, -5.0]
    assert p.memory.backward_weight == [-2.0, -3.0]
    assert p.costs.comm == [pytest.approx(0.2)]  # one boundary: latency 0.1 + output 1.0 / bandwidth 10
    assert p.memory.limit is None and p.microbatches == 4


def test_recompute_adds_the_forward_to_b_and_swaps_the_deltas_of_layers_that_define_it() -> None:
    layers = small_model().expanded()
    cluster = Cluster(devices=2, microbatches=2)
    p = induce(layers, cluster, Split.of([0, 3, 6], [True, False]), 2)
    # embed has no recompute spec: unchanged; block.0-1: B 1 + F 1 each, deltas 0.25 / -0.25 / 0
    assert p.costs.backward_input == [4.0, 4.0]
    assert p.memory.forward == [1.0, 8.0]
    assert p.memory.backward_input == [-1.0, -5.0]
    assert p.memory.backward_weight == [0.0, -3.0]


def test_limit_is_memory_minus_static_and_recompute_is_a_transient_of_its_stage() -> None:
    layers = small_model().expanded()
    cluster = Cluster(devices=2, microbatches=4, memory_per_device=[30.0, 40.0])
    p = induce(layers, cluster, Split.of([0, 3, 6], [True, False]), 4)
    # device 0: static 2 + 3 + 3 = 8 -> 30 - 8; device 1: static 3 + 3 + 4 = 10 -> 40 - 10
    assert p.memory.limit == [22.0, 30.0]
    # stage 0 recomputes two blocks: their full forward activations, 2 + 2, are live again during its B
    assert p.memory.backward_input_transient == [4.0, 0.0]
    schedule = solve(p, "greedy")
    assert validate(schedule) == [] and schedule.peak_memory[0] <= 22.0


def test_v_placement_folds_stages_and_sums_a_devices_static_over_both_chunks() -> None:
    layers = small_model(blocks=6).expanded()  # 8 layers
    cluster = Cluster(devices=2, stages_per_device=2, placement="v", microbatches=4, memory_per_device=100.0,
                      link={"latency": 0.5})
    p = induce(layers, cluster, Split.of([0, 2, 4, 6, 8]), 4)
    # stages 0 and 3 on device 0: embed + block.0 and block.5 + head -> static 2 + 3 + 3 + 4
    assert p.memory.limit == [100.0 - 12.0, 100.0 - 12.0]
    assert p.costs.comm == [0.5, 0.0, 0.5]  # the 1 -> 2 boundary stays on device 1 and costs nothing


def test_comm_is_each_boundarys_own_lag() -> None:
    model = small_model().model_copy(deep=True)
    layers = model.expanded()
    layers[2] = type(layers[2])(**{**vars(layers[2]), "output": 5.0})
    cluster = Cluster(devices=3, microbatches=3, link={"latency": 1.0, "bandwidth": 2.0})
    assert induce(layers, cluster, Split.of([0, 3, 5, 6]), 3).costs.comm == [3.5, 1.5]  # block.1 sends 5
    assert induce(layers, cluster, Split.of([0, 2, 5, 6]), 3).costs.comm == [1.5, 1.5]


def test_the_induced_problem_solves_and_validates() -> None:
    layers = small_model().expanded()
    cluster = Cluster(devices=2, microbatches=3, memory_per_device=40.0, link={"latency": 0.1})
    problem = induce(layers, cluster, Split.of([0, 4, 6], [True, False]), 3)
    schedule = solve(problem, "greedy")
    assert schedule.ops and validate(schedule) == []
    assert max(schedule.peak_memory) <= 40.0


@pytest.mark.parametrize("bounds, recompute, message", [
    ([0, 3], [False], "needs 3 bounds"),
    ([0, 3, 5], [False, False], "bounds must run from 0 to the 6 layers"),
    ([0, 0, 6], [False, False], "stage 0 is empty"),
    ([0, 3, 6], [False], "recompute has 1 flags for 2 stages"),
])
def test_malformed_splits_are_rejected_with_the_reason(bounds: list[int], recompute: list[bool],
                                                         message: str) -> None:
    with pytest.raises(ValueError, match=message):
        induce(small_model().expanded(), Cluster(devices=2, microbatches=2), Split.of(bounds, recompute), 2)


def test_static_memory_over_a_device_names_the_device_and_layers() -> None:
    cluster = Cluster(devices=2, microbatches=2, memory_per_device=[8.0, 100.0])
    with pytest.raises(InfeasibleSplit, match=r"device 0: static memory 11 of layers \[0, 4\)"):
        induce(small_model().expanded(), cluster, Split.of([0, 4, 6]), 2)


def test_one_microbatch_over_the_limit_names_the_device_and_heaviest_layer() -> None:
    # device 1 holds block.3 + head: static 7, one microbatch needs 2 + 4 = 6 activations
    cluster = Cluster(devices=2, microbatches=2, memory_per_device=[100.0, 12.0])
    with pytest.raises(InfeasibleSplit, match=r"device 1: one microbatch needs 6 .*heaviest layer 5 \(head\)"):
        induce(small_model().expanded(), cluster, Split.of([0, 4, 6]), 2)
    # recomputing block.3 frees 1.75 of its activations but its transient 2 comes back during B
    with pytest.raises(InfeasibleSplit, match="recompute transient 2"):
        induce(small_model().expanded(), cluster, Split.of([0, 4, 6], [False, True]), 2)


def test_a_layer_that_fits_no_device_makes_the_model_infeasible() -> None:
    layers = small_model().expanded()
    assert model_infeasibility(layers, Cluster(devices=2, microbatches=2)) is None
    reason = model_infeasibility(layers, Cluster(devices=6, microbatches=2, memory_per_device=7.5))
    assert reason is not None and reason.startswith("layer 5 (head) needs 8")
    reason = model_infeasibility(layers, Cluster(devices=2, microbatches=2, memory_per_device=8.5))
    assert reason is not None and "static memory 18 exceeds the 17" in reason


def with_units(**units: str) -> Model:
    return Model.model_validate({**small_model().model_dump(), "units": units})


def test_the_induced_problem_carries_the_models_units_outside_its_cache_key() -> None:
    model = with_units(time="us", memory="MiB")
    layers, cluster, split = model.expanded(), Cluster(devices=2, microbatches=2), Split.of([0, 3, 6])
    labelled = induce(layers, cluster, split, 2, model.units)
    assert labelled.units is not None and (labelled.units.time, labelled.units.memory) == ("us", "MiB")
    plain = induce(layers, cluster, split, 2)
    assert plain.units is None and problem_key(plain) == problem_key(labelled)
    # a name a Problem refuses (over 16 characters) is left out; the other label stays
    long = with_units(time="milliseconds-ish!", memory="GiB")
    kept = induce(layers, cluster, split, 2, long.units).units
    assert kept is not None and (kept.time, kept.memory) == (None, "GiB")


def test_a_plans_problem_and_schedule_name_the_models_units() -> None:
    model = with_units(time="s", memory="GB")
    result = plan(model, Cluster(devices=2, microbatches=2), "greedy", time_limit_s=2)
    assert result.problem is not None and result.problem.units is not None
    assert (result.problem.units.time, result.problem.units.memory) == ("s", "GB")
    assert result.schedule is not None and result.schedule.problem.units == result.problem.units

"""The planner fills the step's tail: each stage's gradient sync over the data-parallel group, each
device's optimizer step, and comm over the inter-node link at node boundaries."""

from __future__ import annotations

import pytest
from planning_models import small_model

from pipesched.solver import validate
from pipesched.solver.costmodel import DEVICES, TransformerConfig, transformer_model
from pipesched.solver.costmodel.transformer import default_cluster
from pipesched.solver.planning import Cluster, DataParallel, Link, Model, Split, induce, plan


def _with_sizes(model: Model, gradient: float = 2.0, optimizer: float = 6.0) -> Model:
    return model.model_copy(update={"layers": [x.model_copy(update={"gradient": gradient, "optimizer": optimizer})
                                               for x in model.layers]})


def test_a_ring_all_reduce_and_a_reduce_scatter_move_what_their_formulas_say() -> None:
    link = Link(latency=0.01, bandwidth=4.0)
    assert DataParallel(degree=1, link=link).sync_time(8.0) == 0.0
    assert DataParallel(degree=8, link=link).sync_time(8.0) == pytest.approx(2 * 7 / 8 * 8.0 / 4.0 + 2 * 7 * 0.01)
    assert DataParallel(degree=8, link=link, zero=2).sync_time(8.0) == pytest.approx(7 / 8 * 8.0 / 4.0 + 7 * 0.01)
    assert DataParallel(degree=4, link=link, zero=1).sync_time(8.0) == DataParallel(degree=4, link=link).sync_time(8.0)


def test_the_induced_problem_syncs_each_stages_gradients_and_steps_each_devices_optimizer() -> None:
    model = _with_sizes(small_model(4))  # embed, 4 blocks, head: 6 layers
    layers = model.expanded()
    dp = DataParallel(degree=4, link=Link(latency=0.0, bandwidth=2.0))
    cluster = Cluster(devices=2, stages_per_device=2, microbatches=4, data_parallel=dp, memory_bandwidth=3.0)
    split = Split.of([0, 2, 3, 5, 6])  # stages hold 2, 1, 2, 1 layers; devices 0, 1, 0, 1
    problem = induce(layers, cluster, split, 4)
    per_layer = dp.sync_time(2.0)
    assert problem.costs.grad_sync == pytest.approx([2 * per_layer, per_layer, 2 * per_layer, per_layer])
    assert problem.costs.optimizer == pytest.approx([(2 + 2) * 6.0 / 3.0, (1 + 1) * 6.0 / 3.0])
    bare = induce(layers, Cluster(devices=2, stages_per_device=2, microbatches=4), split, 4)
    assert bare.costs.grad_sync == 0.0 and bare.costs.optimizer == 0.0


def test_a_stage_boundary_across_nodes_takes_the_inter_node_link() -> None:
    layers = small_model(6).expanded()  # 8 layers, each sends 1.0 on (the head 0)
    fast, slow = Link(latency=0.01, bandwidth=10.0), Link(latency=0.5, bandwidth=0.5)
    cluster = Cluster(devices=8, microbatches=8, link=fast, devices_per_node=4, inter_node_link=slow)
    problem = induce(layers, cluster, Split.of(list(range(9))), 8)
    assert problem.costs.comm == pytest.approx([fast.time(1.0)] * 3 + [slow.time(1.0)] + [fast.time(1.0)] * 3)
    with pytest.raises(ValueError, match="inter_node_link needs devices_per_node"):
        Cluster(devices=8, microbatches=8, inter_node_link=slow)


def test_a_plan_with_data_parallelism_reports_its_step_and_is_no_shorter_than_its_pipeline() -> None:
    model = _with_sizes(small_model(6), gradient=4.0)
    cluster = Cluster(devices=2, stages_per_device=2, microbatches=8, memory_bandwidth=2.0,
                      data_parallel=DataParallel(degree=8, link=Link(bandwidth=1.0)))
    found = plan(model, cluster, "auto", 4.0)
    schedule = found.schedule
    assert schedule is not None and validate(schedule) == []
    assert schedule.syncs and schedule.optimizer_steps and schedule.step_end > schedule.pipeline_end
    assert found.step_time == pytest.approx(schedule.objective_value)
    assert all(b.step_time is None or b.step_time >= found.step_time - 1e-6 for b in found.baselines)


def test_the_cost_model_sizes_gradients_and_its_cluster_has_the_nodes_and_the_replicas() -> None:
    config = TransformerConfig(hidden=1024, layers=4, heads=16, kv_heads=16, ffn=4096, vocab=32000, seq=1024,
                               microbatch_size=1, tp=2, dp=16, zero=1)
    model = transformer_model(config, DEVICES["h100"])
    block = next(x for x in model.layers if x.name == "block")
    assert block.gradient == pytest.approx(block.parameters / 2 * 2 / 2**30)  # bf16 gradient of a tp = 2 shard
    assert block.optimizer == pytest.approx(block.parameters / 2 * (2 * 12 + 2 + 2) / 16 / 2**30)  # ZeRO-1 over 16
    cluster = default_cluster(config, DEVICES["h100"], devices=8)
    assert cluster.devices_per_node == 4 and cluster.inter_node_link is not None
    assert cluster.data_parallel is not None and (cluster.data_parallel.degree, cluster.data_parallel.zero) == (16, 1)
    assert cluster.memory_bandwidth == pytest.approx(3.35e12 / 1e3 / 2**30)

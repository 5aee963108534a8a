"""Per-layer recompute: a stage's sums with only some layers recomputed, and the cut of whole-stage
recompute to the layers the memory estimate needs."""

from __future__ import annotations

import math

from planning_models import small_model

from pipesched.solver import validate
from pipesched.solver.planning import Cluster, Plan, PlanStage
from pipesched.solver.planning.induce import Split, induce
from pipesched.solver.planning.labels import device_labels
from pipesched.solver.planning.partial import count_moves, counts_of, device_demand, thinned
from pipesched.solver.planning.planner import plan
from pipesched.solver.planning.split import SplitContext
from pipesched.solver.planning.sums import recompute_order, stage_sums


def test_a_partial_stage_pays_and_saves_for_exactly_its_recomputed_layers() -> None:
    layers = small_model(6).expanded()  # embed, 6 blocks (recomputable), head
    order = recompute_order(layers, 0, 8)
    assert order == list(range(1, 7))  # identical blocks: model order; embed and head cannot recompute
    plain, full = stage_sums(layers, 0, 8, False), stage_sums(layers, 0, 8, True)
    assert stage_sums(layers, 0, 8, True, 6) == full
    for count in range(7):
        part = stage_sums(layers, 0, 8, True, count)
        picked = [layers[k] for k in order[:count]]
        assert math.isclose(part.backward_input, plain.backward_input + sum(x.forward for x in picked))
        assert math.isclose(part.transient, sum(x.mem_forward for x in picked))
        saved = sum(x.mem_forward - x.recompute[0] for x in picked)
        assert math.isclose(part.d_forward, plain.d_forward - saved)
        assert part.forward == plain.forward and part.static == plain.static


def test_thinning_keeps_only_the_recompute_the_estimate_needs() -> None:
    layers = small_model(8).expanded()
    cluster = Cluster(devices=2, microbatches=4, memory_per_device=28.0)
    ctx = SplitContext.of(layers, cluster, 4)
    whole = ctx.with_recompute([0, 5, 10])
    assert whole is not None and whole.recompute[0]  # device 0 (2 in flight) is over without recompute
    cut = thinned(ctx, whole)
    assert cut is not None
    counts, before = counts_of(ctx, cut), counts_of(ctx, whole)
    assert all(a <= b for a, b in zip(counts, before, strict=True)) and counts != before
    for d in range(2):
        assert device_demand(ctx, cut, d) <= 28.0 + 1e-9
    fewer = counts.copy()
    fewer[0] -= 1  # one layer fewer on the cut stage no longer fits the estimate
    assert device_demand(ctx, Split.of(cut.bounds, [c > 0 for c in fewer], fewer), 0) > 28.0
    problem = induce(layers, cluster, cut, 4)  # and the exact limit takes it
    assert problem.costs.backward_input[0] < induce(layers, cluster, whole, 4).costs.backward_input[0]


def test_count_moves_step_one_layer_and_half_within_the_stage() -> None:
    layers = small_model(8).expanded()
    ctx = SplitContext.of(layers, Cluster(devices=2, microbatches=4), 4)
    split = Split.of([0, 5, 10], [True, False], [4, None])  # stage 0 holds 4 recomputable blocks
    moved = {tuple(counts_of(ctx, x)) for x in count_moves(ctx, split, {1})}
    assert moved == {(3, 0), (2, 0), (4, 1), (4, 2)}  # stage 1: blocks 5-8 (4 recomputable) and the head


def test_a_memory_tight_plan_with_per_layer_recompute_validates() -> None:
    cluster = Cluster(devices=2, microbatches=4, memory_per_device=28.0)
    result = plan(small_model(8), cluster, "auto", time_limit_s=4)
    assert result.schedule is not None and validate(result.schedule) == []
    assert any(st.recompute for st in result.stages)
    assert all(peak <= 28.0 + 1e-9 for peak in result.peak_memory)


def test_a_partial_stage_is_labelled_with_its_recomputed_layer_count() -> None:
    stages = [PlanStage(stage=0, device=0, layers=(0, 5), recompute=True, recompute_layers=[1, 2]),
              PlanStage(stage=1, device=1, layers=(5, 10), recompute=True)]
    labels = device_labels(Plan(model=small_model(8), cluster=Cluster(devices=2, microbatches=4), method="auto",
                                status="feasible", stages=stages))
    assert labels == ["layers 0–4 rc 2", "layers 5–9 rc"]

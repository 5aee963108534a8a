"""For every model and split: stages cover the layers once, sums and limits add up, rules give splits."""

from __future__ import annotations

import math

from hypothesis import given, reject, settings
from hypothesis import strategies as st

from pipesched.solver.planning import Cluster, Model
from pipesched.solver.planning.induce import InfeasibleSplit, Split, induce, stage_devices
from pipesched.solver.planning.split import (
    SplitContext,
    adapipe,
    balanced,
    megatron,
    torchtitan,
    uniform,
)
from pipesched.solver.planning.sums import stage_sums

COST = st.sampled_from([0.0, 0.1, 0.2, 0.5, 1.0, 2.5])


@st.composite
def models(draw: st.DrawFn) -> Model:
    layers = []
    for k in range(draw(st.integers(2, 5))):
        f, held, kept = draw(COST), draw(COST), draw(COST)
        layer = {"name": f"k{k}", "repeat": draw(st.integers(1, 3)), "forward": f, "backward_input": draw(COST),
                 "backward_weight": draw(COST), "static": draw(COST), "output": draw(COST),
                 "memory": {"forward": held, "backward_input": -held + kept, "backward_weight": -kept}}
        if draw(st.booleans()):
            layer["recompute"] = {"memory": {"forward": held / 4, "backward_input": kept - held / 4,
                                             "backward_weight": -kept}}
        layers.append(layer)
    return Model.model_validate({"layers": layers})


@st.composite
def cases(draw: st.DrawFn) -> tuple[Model, Cluster, Split]:
    model = draw(models())
    n = len(model.expanded())
    v = draw(st.sampled_from([1, 2]))
    p = draw(st.integers(1, max(1, min(3, n // v))))
    placement = draw(st.sampled_from(["loop", "v"])) if v == 2 else "loop"
    cluster = Cluster(devices=p, stages_per_device=v, placement=placement, microbatches=4,
                      memory_per_device=draw(st.sampled_from([None, 20.0, 60.0])),
                      link={"latency": draw(COST), "bandwidth": draw(st.sampled_from([None, 10.0]))})
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), min_size=p * v - 1, max_size=p * v - 1)))
    rc = draw(st.lists(st.booleans(), min_size=p * v, max_size=p * v))
    return model, cluster, Split.of([0, *cuts, n], rc)


@settings(max_examples=60, deadline=None)
@given(cases())
def test_induced_problem_adds_up(case: tuple[Model, Cluster, Split]) -> None:
    model, cluster, split = case
    layers = model.expanded()
    assert [i for s in range(split.num_stages) for i in split.layers(s)] == list(range(len(layers)))
    try:
        problem = induce(layers, cluster, split, 4)
    except InfeasibleSplit as e:  # the split holds more than a device has: it says which device
        assert str(e).startswith("device ")
        reject()
    sums = [stage_sums(layers, split.bounds[s], split.bounds[s + 1], split.recompute[s])
            for s in range(split.num_stages)]
    extra = sum(x.forward for s in range(split.num_stages) for x in layers[split.bounds[s]:split.bounds[s + 1]]
                if split.recompute[s] and x.recompute is not None)
    assert math.isclose(sum(problem.costs.forward), sum(x.forward for x in layers), abs_tol=1e-9)
    assert math.isclose(sum(problem.costs.backward_input), sum(x.backward_input for x in layers) + extra,
                        abs_tol=1e-9)
    where = stage_devices(cluster)
    lags = [cluster.link.time(sums[s].output) if where[s] != where[s + 1] else 0.0 for s in range(split.num_stages - 1)]
    comm = problem.costs.comm if isinstance(problem.costs.comm, list) else [problem.costs.comm] * len(lags)
    assert all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) for a, b in zip(comm, lags, strict=True))
    transient = problem.memory.backward_input_transient
    expected = [x.transient for x in sums]
    assert (transient == 0.0 and not any(expected)) or all(
        math.isclose(a, b, abs_tol=1e-9) for a, b in zip(transient, expected, strict=True))
    if cluster.memory_per_device is not None:
        assert isinstance(problem.memory.limit, list)
        for d, limit in enumerate(problem.memory.limit):
            mine = [s for s in range(split.num_stages) if where[s] == d]
            held = sum(sums[s].static for s in mine)
            assert math.isclose(limit + held, cluster.memory(d), abs_tol=1e-6)


@settings(max_examples=40, deadline=None)
@given(cases())
def test_every_rule_gives_a_well_formed_split_or_none(case: tuple[Model, Cluster, Split]) -> None:
    model, cluster, _ = case
    layers = model.expanded()
    ctx = SplitContext.of(layers, cluster, 4)
    found = [balanced(ctx), adapipe(ctx), uniform(ctx, layers), torchtitan(ctx, layers), megatron(ctx, layers)]
    for split in found:
        if split is not None:
            assert split.errors(len(layers), cluster.num_stages) == []
            assert all(not rc or ctx.table.can_recompute(split.bounds[s], split.bounds[s + 1])
                       for s, rc in enumerate(split.recompute))

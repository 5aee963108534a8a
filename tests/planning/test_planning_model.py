"""The Model / Cluster wire format: expansion and the checks that name the field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pipesched.solver.planning import Cluster, Model

BLOCK = {"name": "block", "repeat": 3, "forward": 1.0, "backward_input": 1.0, "backward_weight": 0.8,
         "memory": {"forward": 1.1, "backward_input": -0.7, "backward_weight": -0.4}, "static": 3.5,
         "output": 0.06}


def test_repeat_expands_into_indexed_layers_in_model_order() -> None:
    model = Model.model_validate({"layers": [{"name": "embed", "forward": 0.1}, BLOCK, {"name": "head"}]})
    layers = model.expanded()
    assert [x.name for x in layers] == ["embed", "block.0", "block.1", "block.2", "head"]
    assert [x.index for x in layers] == [0, 1, 2, 3, 4]
    assert layers[2].kind == "block" and layers[2].mem_forward == 1.1


@pytest.mark.parametrize("bad, field", [
    ({"name": "x", "forward": float("inf")}, "layers[0] (x).forward"),
    ({"name": "x", "forward": 1e308}, "layers[0] (x).forward"),
    ({"name": "x", "static": -1.0}, "layers[0] (x).static"),
    ({"name": "x", "memory": {"forward": 1.0}}, "layers[0] (x).memory deltas sum to 1"),
    ({"name": "x", "recompute": {"memory": {"forward": 2.0, "backward_weight": -1.0}}},
     "layers[0] (x).recompute.memory deltas sum to 1"),
])
def test_bad_layers_are_rejected_naming_the_field(bad: dict, field: str) -> None:
    with pytest.raises(ValidationError, match=field.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        Model.model_validate({"layers": [bad]})


def test_cluster_checks_name_the_field() -> None:
    with pytest.raises(ValidationError, match="memory_per_device has 2 entries but there are 4 devices"):
        Cluster(devices=4, microbatches=8, memory_per_device=[1.0, 2.0])
    with pytest.raises(ValidationError, match="placement 'v' needs stages_per_device = 2"):
        Cluster(devices=4, microbatches=8, placement="v")
    with pytest.raises(ValidationError, match="microbatches must be between 1 and 4096"):
        Cluster(devices=4, microbatches=[8, 0])


def test_link_time_is_latency_plus_size_over_bandwidth() -> None:
    c = Cluster(devices=2, microbatches=[32, 16, 32], link={"latency": 0.01, "bandwidth": 50.0})
    assert c.link.time(0.5) == pytest.approx(0.02)
    assert c.microbatch_choices() == [16, 32]
    assert Cluster(devices=2, microbatches=4).link.time(123.0) == 0.0

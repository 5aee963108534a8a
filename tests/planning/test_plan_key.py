"""The plan cache key is derived from the models' fields: a field at its default is absent (however it
was spelled), and setting any field of the Model, its layers or the Cluster to another value moves the
key. The fields are enumerated from the models, so a field added later is covered without editing this."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from pipesched.solver.planning import Cluster, Layer, Model
from pipesched.solver.planning.key import plan_key

MODEL = Model(layers=[Layer(name="block", repeat=4, forward=1.0, backward_input=1.0, backward_weight=1.0,
                            memory={"forward": 1.0, "backward_input": 0.0, "backward_weight": -1.0}),
                      Layer(name="head", forward=0.5, backward_input=0.5, backward_weight=0.2)])
CLUSTER = Cluster(devices=2, microbatches=4)


def _other(info: Any, value: Any) -> Any:
    """Another valid value for a field, by what it holds now (None: no rule for it)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int) and not isinstance(value, bool):
        return value + 1
    if isinstance(value, float):
        return value + 0.5
    if isinstance(value, str):
        return value + "x"
    return None


def _changes(obj: BaseModel, prefix: str = "") -> list[tuple[str, dict[str, Any]]]:
    """(field path, update dict) for every scalar field of ``obj`` that can take another value."""
    out = []
    for name, info in type(obj).model_fields.items():
        value = getattr(obj, name)
        if isinstance(value, BaseModel):
            out += [(f"{prefix}{name}.{p}", {name: value.model_copy(update=u)}) for p, u in _changes(value)]
        elif (new := _other(info, value)) is not None:
            out.append((f"{prefix}{name}", {name: new}))
    return out


def test_defaults_spelled_out_or_left_out_share_a_key() -> None:
    spelled = Model.model_validate({**MODEL.model_dump(), "units": {"time": "ms", "memory": "GiB"}})
    assert plan_key(spelled, Cluster(devices=2, microbatches=[4], stages_per_device=1)) == plan_key(MODEL, CLUSTER)


def test_every_scalar_field_moves_the_key() -> None:
    base = plan_key(MODEL, CLUSTER)
    moved = set()
    for path, update in _changes(CLUSTER):
        try:
            cluster = Cluster.model_validate({**CLUSTER.model_dump(), **{k: (v.model_dump() if isinstance(v, BaseModel) else v)
                                                                         for k, v in update.items()}})
        except ValueError:
            continue
        assert plan_key(MODEL, cluster) != base, path
        moved.add(f"cluster.{path}")
    for path, update in _changes(MODEL.layers[1]):
        layer = MODEL.layers[1].model_copy(update=update)
        assert plan_key(MODEL.model_copy(update={"layers": [MODEL.layers[0], layer]}), CLUSTER) != base, path
        moved.add(f"layer.{path}")
    set_later = {"gradient": 0.3, "optimizer": 0.1, "parameters": 1000, "static": 2.0}
    for name, value in set_later.items():
        layer = MODEL.layers[1].model_copy(update={name: value})
        assert plan_key(MODEL.model_copy(update={"layers": [MODEL.layers[0], layer]}), CLUSTER) != base, name
    extra = {"data_parallel": {"degree": 8}, "devices_per_node": 1, "memory_bandwidth": 3.0}
    for name, value in extra.items():
        assert plan_key(MODEL, Cluster.model_validate({**CLUSTER.model_dump(), name: value})) != base, name
    assert {"cluster.devices", "cluster.split_backward", "layer.forward", "layer.name"} <= moved
    assert plan_key(MODEL, CLUSTER, "tok_embeddings;layers.{i};norm,lm_head") != base

"""The Layer fields the cost models fill (``parameters``, ``comm``; and the Model's ``microbatch_size``,
``sequence_length``): checked, and invisible to the plan cache key while unset (tests/planning/test_plan_key.py: every field moves it when set)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from pipesched.solver.costmodel import DEVICES, TransformerConfig, transformer_model
from pipesched.solver.planning import Cluster, Layer, LayerComm, Model
from pipesched.solver.planning.key import canonical_request, plan_key

ROOT = Path(__file__).resolve().parents[2]

def _example_without_parameters() -> Model:
    """The example without the later fields: no layer ``parameters``, no Model ``microbatch_size`` /
    ``sequence_length``."""
    model = Model.model_validate_json((ROOT / "examples" / "model_llama3_8b.json").read_text())
    return model.model_copy(update={"layers": [x.model_copy(update={"parameters": None}) for x in model.layers],
                                    "microbatch_size": None, "sequence_length": None})


def test_unset_fields_are_not_in_the_plan_key() -> None:
    model = _example_without_parameters()
    cluster = Cluster(devices=8, microbatches=32, memory_per_device=80.0)
    assert all("parameters" not in x and "comm" not in x for x in canonical_request(model, cluster)["model"]["layers"])


def test_set_fields_move_the_key() -> None:
    model = _example_without_parameters()
    cluster = Cluster(devices=8, microbatches=32)
    base = plan_key(model, cluster)
    counted = model.model_copy(update={"layers": [model.layers[0].model_copy(update={"parameters": 7}),
                                                  *model.layers[1:]]})
    comm = model.model_copy(update={"layers": [model.layers[0], model.layers[1].model_copy(
        update={"comm": LayerComm(forward=1.0)}), model.layers[2]]})
    assert len({base, plan_key(counted, cluster), plan_key(comm, cluster)}) == 3


def test_comm_must_fit_inside_the_time_it_is_part_of() -> None:
    with pytest.raises(ValidationError, match=r"layers\[0\] \(moe\)\.comm\.backward_input: 3 exceeds"):
        Model(layers=[Layer(name="moe", forward=2.0, backward_input=2.0, comm=LayerComm(forward=1.0, backward_input=3.0))])
    with pytest.raises(ValidationError, match="parameters"):
        Layer(name="x", parameters=-1)


def test_model_transformer_counts_each_layer() -> None:
    """Llama 3 8B: 8,030,261,248 parameters (the published count), as embed + 32 blocks + head."""
    model = transformer_model(TransformerConfig(hidden=4096, layers=32, heads=32, kv_heads=8, ffn=14336,
                                                vocab=128256, seq=8192, microbatch_size=1), DEVICES["h100"])
    assert sum(x.parameters * x.repeat for x in model.layers) == 8_030_261_248

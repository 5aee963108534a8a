"""A Model may record the microbatch size and sequence length its costs were made for: the plan carries
them to a framework export, and models without them keep the cache keys they had."""

from __future__ import annotations

import pytest
from planning_models import small_model
from pydantic import ValidationError

from pipesched.solver.costmodel.hardware import DEVICES
from pipesched.solver.costmodel.transformer import TransformerConfig, transformer_model
from pipesched.solver.planning import Cluster, Model, plan
from pipesched.solver.planning.key import canonical_request, plan_key

OPTIONAL_MODEL_FIELDS = ("microbatch_size", "sequence_length")

CLUSTER = Cluster(devices=2, microbatches=4)


def test_unset_they_are_not_in_the_key_and_each_one_set_moves_it() -> None:
    model = small_model()
    assert not set(OPTIONAL_MODEL_FIELDS) & set(canonical_request(model, CLUSTER)["model"])
    keys = {plan_key(model, CLUSTER)}
    for field in OPTIONAL_MODEL_FIELDS:
        keys.add(plan_key(model.model_copy(update={field: 2}), CLUSTER))
    assert len(keys) == 1 + len(OPTIONAL_MODEL_FIELDS)


def test_model_transformer_records_them_and_the_plan_carries_them() -> None:
    config = TransformerConfig(hidden=256, layers=4, heads=8, kv_heads=8, ffn=768, vocab=2048, seq=128,
                               microbatch_size=2)
    model = transformer_model(config, DEVICES["h100"])
    assert (model.microbatch_size, model.sequence_length) == (2, 128)
    found = plan(model, CLUSTER, "1f1b", 5.0)
    again = type(found).model_validate_json(found.model_dump_json())
    assert (again.model.microbatch_size, again.model.sequence_length) == (2, 128)


@pytest.mark.parametrize("field", OPTIONAL_MODEL_FIELDS)
def test_a_non_positive_value_is_refused_naming_the_field(field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        Model.model_validate({**small_model().model_dump(), field: 0})

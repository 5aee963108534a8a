"""Properties of the analytic cost model that must hold for every configuration."""

from __future__ import annotations

import dataclasses
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from pipesched.solver.costmodel import DEVICES, TransformerConfig, transformer_model
from pipesched.solver.planning import Model


@st.composite
def configs(draw: st.DrawFn) -> TransformerConfig:
    kv_heads = draw(st.sampled_from([1, 2, 4, 8]))
    heads = kv_heads * draw(st.sampled_from([1, 2, 4, 8]))
    tp = draw(st.sampled_from([t for t in (1, 2, 4, 8) if heads % t == 0]))
    zero = draw(st.integers(0, 3))
    return TransformerConfig(
        hidden=heads * draw(st.sampled_from([32, 64, 128])), layers=draw(st.integers(1, 96)), heads=heads,
        kv_heads=kv_heads, ffn=draw(st.integers(64, 65536)), vocab=draw(st.integers(2, 262144)),
        seq=draw(st.sampled_from([128, 1024, 4096, 32768])), microbatch_size=draw(st.integers(1, 8)), tp=tp,
        dtype=draw(st.sampled_from(["bf16", "fp16", "fp32"])), flash_attention=draw(st.booleans()),
        gated_mlp=draw(st.booleans()), optimizer=draw(st.sampled_from(["adam", "sgd"])), zero=zero,
        dp=draw(st.integers(1, 64)))


@settings(max_examples=150, deadline=None)
@given(configs(), st.sampled_from(sorted(DEVICES)))
def test_every_config_gives_a_valid_model_whose_shape_follows_the_formulas(config: TransformerConfig,
                                                                           device: str) -> None:
    model = transformer_model(config, DEVICES[device])
    assert Model.model_validate_json(model.model_dump_json()) == model  # deltas sum to 0, all finite
    embed, block, head = model.layers
    assert block.repeat == config.layers
    # B = W + 2 x attention core >= F = W + core >= W (matmuls once each)
    assert block.backward_input >= block.forward >= block.backward_weight > 0
    core = block.forward - block.backward_weight
    assert math.isclose(block.backward_input - block.forward, core, rel_tol=1e-9, abs_tol=1e-12 * block.forward)
    assert head.backward_input == head.forward >= head.backward_weight > 0
    # recomputation keeps only the block input after F, never more than without it
    assert 0 < block.recompute.memory.forward <= block.memory.forward
    assert block.recompute.memory.backward_weight == block.memory.backward_weight
    assert embed.output == block.output > 0 and head.output == 0


@settings(max_examples=60, deadline=None)
@given(configs())
def test_flash_attention_zero_and_tensor_parallelism_never_cost_memory(config: TransformerConfig) -> None:
    h100 = DEVICES["h100"]

    def block(**change: object) -> object:
        return transformer_model(dataclasses.replace(config, **change), h100).layers[1]

    assert block(flash_attention=True).memory.forward <= block(flash_attention=False).memory.forward
    statics = [block(zero=z).static for z in range(4)]
    assert statics == sorted(statics, reverse=True)  # each ZeRO stage shards more (equal when dp = 1)
    if config.heads % 2 == 0 and config.tp == 1:
        one, two = block(), block(tp=2)
        assert abs(two.memory.forward - one.memory.forward / 2) <= 1e-12 * one.memory.forward
        assert abs(two.forward - one.forward / 2) <= 1e-12 * one.forward

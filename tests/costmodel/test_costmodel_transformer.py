"""The analytic transformer cost model against numbers worked out by hand (arithmetic in comments)."""

from __future__ import annotations

import dataclasses

import pytest

from pipesched.solver.costmodel import (
    DEVICES,
    LINKS,
    DeviceSpec,
    LinkSpec,
    TransformerConfig,
    default_cluster,
)
from pipesched.solver.costmodel import transformer_model as model_of  # noqa: I001
from pipesched.solver.planning import Model

GIB = 2**30
# 100 TFLOP/s peak at MFU 0.5 -> 5e13 FLOP/s achieved; 1 TB/s memory -> 1e12 bytes/s
DEVICE = DeviceSpec("test", peak_tflops=100.0, memory_gib=40.0, mfu=0.5, hbm_tbps=1.0)

# Korthikanti et al.'s shape: F = 4h, plain MLP, K = A, 16-bit activations, no flash attention.
# h = 1024, A = 16, s = 2048, b = 2 -> tokens n = s·b = 4096, x = s·b·h = 2^22
PLAIN = TransformerConfig(hidden=1024, layers=4, heads=16, kv_heads=16, ffn=4096, vocab=32768, seq=2048,
                          microbatch_size=2, flash_attention=False, gated_mlp=False)


def test_block_costs_match_the_hand_computed_flops() -> None:
    block = model_of(PLAIN, DEVICE).layers[1]
    # matmuls per token: QKV 2·3h² + O 2h² + MLP 2·2·h·4h = 24h²; n·24h² = 4096·24·2^20 = 103,079,215,104
    # attention core per token 4·s·h: n·4·2048·1024 = 34,359,738,368
    # F = 137,438,953,472 FLOPs / 5e13 = 2.74877906944 ms
    assert block.forward == pytest.approx(2.74877906944, rel=1e-12)
    # B = matmuls + 2 × core = 171,798,691,840 / 5e13 = 3.4359738368 ms
    assert block.backward_input == pytest.approx(3.4359738368, rel=1e-12)
    # W = matmuls only = 103,079,215,104 / 5e13 = 2.06158430208 ms
    assert block.backward_weight == pytest.approx(2.06158430208, rel=1e-12)
    assert block.repeat == 4


def test_block_memory_is_korthikanti_34sbh_plus_5as2b_and_32sbh_until_w() -> None:
    block = model_of(PLAIN, DEVICE).layers[1]
    # 34·x = 34·2^22 bytes = 34/256 GiB = 0.1328125; 5·A·s²·b = 5·16·2048²·2 = 5·2^27 bytes = 0.625 GiB
    assert block.memory.forward == pytest.approx(0.1328125 + 0.625, rel=1e-12)
    # W keeps each linear's input and output gradient: QKV 2x + 6x, O 2x + 2x, fc1 2x + 8x, fc2 8x + 2x = 32x
    # = 32/256 GiB = 0.125, so B frees 0.7578125 - 0.125 = 0.6328125
    assert block.memory.backward_input == pytest.approx(-0.6328125, rel=1e-12)
    assert block.memory.backward_weight == pytest.approx(-0.125, rel=1e-12)
    # recompute: F keeps only the block input 2x = 1/128 GiB; after B the same 32x as without
    rc = block.recompute.memory
    assert (rc.forward, rc.backward_input, rc.backward_weight) == pytest.approx((0.0078125, 0.125 - 0.0078125, -0.125))


def test_flash_attention_removes_the_s_squared_term() -> None:
    block = model_of(dataclasses.replace(PLAIN, flash_attention=True), DEVICE).layers[1]
    assert block.memory.forward == pytest.approx(0.1328125, rel=1e-12)  # 34·x only
    assert block.memory.backward_weight == pytest.approx(-0.125, rel=1e-12)


def test_static_memory_is_16_bytes_per_parameter_for_mixed_precision_adam() -> None:
    layers = model_of(PLAIN, DEVICE).layers
    # block: Q, K, V, O 4h² + MLP 2·h·4h = 12h² + two norms 2h = 12,584,960 params × 16 B = 201,359,360 B
    assert layers[1].static == pytest.approx(201_359_360 / GIB, rel=1e-12)
    # embedding V·h = 33,554,432 × 16 B = 0.5 GiB; head V·h + h = 33,555,456 × 16 B
    assert layers[0].static == pytest.approx(0.5, rel=1e-12)
    assert layers[2].static == pytest.approx(33_555_456 * 16 / GIB, rel=1e-12)


def test_zero1_shards_only_the_optimizer_state() -> None:
    sharded = model_of(dataclasses.replace(PLAIN, zero=1, dp=8), DEVICE).layers[1]
    # 2 (weight) + 2 (grad) + 12 / 8 (Adam state) = 5.5 bytes per parameter
    assert sharded.static == pytest.approx(12_584_960 * 5.5 / GIB, rel=1e-12)


def test_head_costs_the_lm_head_and_a_memory_bound_softmax() -> None:
    head = model_of(PLAIN, DEVICE).layers[2]
    # 2·n·h·V = 2·4096·1024·32768 = 2^38 = 274,877,906,944 FLOPs / 5e13 = 5.49755813888 ms
    # softmax: (2 + 4)·n·V = 805,306,368 bytes at 1e12 B/s = 0.805306368 ms, in F and in B
    assert head.forward == pytest.approx(5.49755813888 + 0.805306368, rel=1e-12)
    assert head.backward_input == pytest.approx(head.forward, rel=1e-12)
    assert head.backward_weight == pytest.approx(5.49755813888, rel=1e-12)
    # after F: norm and head inputs 2·2·n·h = 2^24 B + logits/probabilities 6·n·V = 805,306,368 B
    assert head.memory.forward == pytest.approx((2**24 + 805_306_368) / GIB, rel=1e-12)
    # until W: head input 2·n·h = 2^23 B + logits gradient 2·n·V = 2^28 B
    assert head.memory.backward_weight == pytest.approx(-(2**23 + 2**28) / GIB, rel=1e-12)
    assert head.output == 0.0


def test_embedding_is_memory_bound_and_sends_one_activation() -> None:
    embed = model_of(PLAIN, DEVICE).layers[0]
    # read rows + write output: 2·2·n·h = 16,777,216 bytes at 1e12 B/s
    assert embed.forward == pytest.approx(0.016777216, rel=1e-12)
    assert embed.backward_input == 0.0  # token ids need no gradient
    assert embed.output == pytest.approx(2 * 4096 * 1024 / GIB, rel=1e-12)  # 2 bytes · n · h


def test_gqa_and_gated_mlp_change_only_their_own_terms() -> None:
    # K = 4 of A = 16 heads: K/V width h·K/A = 256; gated MLP with F = 2816
    cfg = dataclasses.replace(PLAIN, kv_heads=4, gated_mlp=True, ffn=2816, flash_attention=True)
    block = model_of(cfg, DEVICE).layers[1]
    n, h = 4096, 1024
    # projections 2n(2h² + 2·h·256) + MLP 2n·3·h·2816 = 2n(2,621,440 + 8,650,752) = 92,341,796,864
    assert block.backward_weight == pytest.approx(92_341_796_864 / 5e13 * 1e3, rel=1e-12)
    assert block.forward == pytest.approx((92_341_796_864 + 4 * n * 2048 * h) / 5e13 * 1e3, rel=1e-12)
    # activations, x = 2^22, y = n·F = 11,534,336: attention 2x(4 + 2·0.25) + x = 10x; MLP 4x + 6y + x
    x, y = 2**22, n * 2816
    assert block.memory.forward == pytest.approx((10 * x + 5 * x + 6 * y) / GIB, rel=1e-12)


def test_tensor_parallelism_divides_time_activations_and_static_by_t() -> None:
    one, four = (model_of(dataclasses.replace(PLAIN, tp=t), DEVICE).layers[1] for t in (1, 4))
    for field in ("forward", "backward_input", "backward_weight", "static", "output"):
        assert getattr(four, field) == pytest.approx(getattr(one, field) / 4, rel=1e-12), field
    assert four.memory.forward == pytest.approx(one.memory.forward / 4, rel=1e-12)


def test_the_model_is_a_valid_planning_model_and_round_trips_as_json() -> None:
    model = model_of(PLAIN, DEVICE)
    assert [layer.name for layer in model.layers] == ["embed", "block", "head"]
    assert len(model.expanded()) == 1 + 4 + 1
    assert Model.model_validate_json(model.model_dump_json()) == model


def test_presets_and_cluster_defaults() -> None:
    assert DEVICES["h100"].peak_tflops == 989.0 and DEVICES["a100"].peak_tflops == 312.0
    cluster = default_cluster(PLAIN, DEVICES["h100"], devices=4)
    nvlink = LINKS["nvlink"]
    assert cluster.memory_per_device == 80.0 and cluster.microbatches == 16
    assert cluster.link.latency == pytest.approx(0.01)  # 10 µs
    # 3600 Gbit/s = 450e9 B/s = 450e9 / 2^30 GiB/s, per ms: 0.419095...
    assert cluster.link.bandwidth == pytest.approx(450e9 / GIB / 1e3) == nvlink.gib_per_ms
    # 16 devices × tp 1 take two 8-GPU nodes: NVLink inside each, InfiniBand at the boundary between them
    wide = default_cluster(PLAIN, DEVICES["h100"], devices=16)
    assert wide.link.latency == pytest.approx(0.01) and wide.devices_per_node == 8
    assert wide.inter_node_link is not None and wide.inter_node_link.latency == pytest.approx(0.02)
    assert wide.boundary_link(7, 8) == wide.inter_node_link and wide.boundary_link(6, 7) == wide.link
    own = default_cluster(PLAIN, DEVICE, LinkSpec("x", latency_us=1.0, gbps=8.0), devices=2, microbatches=[4, 8])
    assert own.link.bandwidth == pytest.approx(1e9 / GIB / 1e3) and own.microbatch_choices() == [4, 8]


@pytest.mark.parametrize(("change", "field"), [
    ({"hidden": 1000}, "hidden"), ({"kv_heads": 5}, "kv_heads"), ({"tp": 3}, "tp"), ({"layers": 0}, "layers"),
    ({"dtype": "fp8"}, "dtype"), ({"zero": 4}, "zero"), ({"optimizer": "lion"}, "optimizer"),
])
def test_bad_configs_name_the_field(change: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        dataclasses.replace(PLAIN, **change)


def test_bad_devices_and_links_name_the_field() -> None:
    with pytest.raises(ValueError, match="mfu"):
        DeviceSpec("x", peak_tflops=1.0, memory_gib=1.0, mfu=1.5)
    with pytest.raises(ValueError, match="gbps"):
        LinkSpec("x", latency_us=1.0, gbps=0.0)


def test_a_training_step_counts_palms_6n_plus_12lhs_flops_per_token() -> None:
    # PaLM (Chowdhery et al. 2022, appendix B): model FLOPs per token = 6·N + 12·L·h·s, N the matmul
    # parameters (here the blocks' and the LM head's; the embedding is a gather)
    from pipesched.solver.costmodel.transformer import block_flops, block_params, head_flops

    cfg = dataclasses.replace(PLAIN, kv_heads=4, gated_mlp=True, ffn=2816)
    n_matmul = cfg.layers * (block_params(cfg) - 2 * cfg.hidden) + cfg.hidden * cfg.vocab
    per_token = (cfg.layers * sum(block_flops(cfg)) + 3 * head_flops(cfg)) / cfg.tokens
    assert per_token == pytest.approx(6 * n_matmul + 12 * cfg.layers * cfg.hidden * cfg.seq, rel=1e-12)

"""Planning a model from a Hub config: MoE all-to-all as ``costs.overlap_fb``, dense and MoE blocks as
one span of blocks for the hand rules and exports, the MTP layer as Megatron's ``m``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipesched.solver import validate
from pipesched.solver.costmodel import DEVICES, default_cluster
from pipesched.solver.costmodel.hf_config import read_config
from pipesched.solver.costmodel.hf_model import hf_model, run_config
from pipesched.solver.planning import Split, induce, plan
from pipesched.solver.planning.bound import pair_free, plan_lower_bound
from pipesched.solver.planning.exports import megatron_layout, torchtitan_fqns
from pipesched.solver.planning.split import core

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "hf"

#: DeepSeek-V3's shape shrunk: 1 dense block, 5 MoE blocks (16 experts, top 4, 1 shared), one MTP module.
SMALL_V3 = {**json.loads((EXAMPLES / "deepseek_v3.json").read_text()), "hidden_size": 1024, "num_attention_heads": 8,
            "num_key_value_heads": 8, "num_hidden_layers": 6, "first_k_dense_replace": 1, "n_routed_experts": 16,
            "num_experts_per_tok": 4, "moe_intermediate_size": 512, "intermediate_size": 2560, "q_lora_rank": 384,
            "kv_lora_rank": 128, "vocab_size": 32000}


@pytest.fixture(scope="module")
def small():  # noqa: ANN201 - (Model, TransformerConfig)
    arch = read_config(SMALL_V3)
    config = run_config(arch, seq=4096, microbatch_size=1, dp=16, zero=1)
    return hf_model(arch, config, DEVICES["h100"], ep=16), config  # 16 expert ranks: two nodes, InfiniBand


def test_dense_and_moe_blocks_are_one_span_and_mtp_is_megatrons_m(small) -> None:  # noqa: ANN001
    model, _ = small
    layers = model.expanded()
    assert [x.kind for x in layers] == ["embed", "block.dense", *["block.moe"] * 5, "mtp", "head"]
    assert core(layers) == (1, 7)
    bounds = [0, 3, 6, 9]
    assert megatron_layout(layers, bounds) == "Et*2|t*3|tmL"
    assert torchtitan_fqns(layers, bounds)[-1] == ["layers.5", "mtp", "norm", "lm_head"]


def test_the_all_to_all_becomes_overlap_fb(small) -> None:  # noqa: ANN001
    """Each stage's factor is max(compute, all-to-all) / (F + B) of its layers: 1 where no layer has an
    all-to-all, below 1 with MoE blocks; a model without ``comm`` induces no ``overlap_fb`` at all."""
    model, config = small
    layers = model.expanded()
    cluster = default_cluster(config, DEVICES["h100"], devices=3, microbatches=6)
    problem = induce(layers, cluster, Split.of([0, 2, 6, 9]), 6)
    first, moe, last = problem.costs.overlap_fb
    assert first == 1.0 and 0.5 <= moe < 1 and moe <= last < 1
    a2a = sum(x.comm[0] + x.comm[1] for x in layers[2:6])
    f, b = problem.costs.forward[1], problem.costs.backward_input[1]
    assert moe == pytest.approx(max(f + b - a2a, a2a) / (f + b), abs=1e-4)
    plain = model.model_copy(update={"layers": [x.model_copy(update={"comm": None}) for x in model.layers]})
    assert induce(plain.expanded(), cluster, Split.of([0, 2, 6, 9]), 6).costs.overlap_fb is None


def test_the_bound_over_splits_allows_for_pairs(small) -> None:  # noqa: ANN001
    model, config = small
    layers = model.expanded()
    scaled = pair_free(layers)
    share = min((t - c) / t for x in layers if x.comm for t, c in zip((x.forward, x.backward_input), x.comm, strict=True))
    k = max(0.5, share)
    assert k < 1
    for s, x in zip(scaled, layers, strict=True):
        assert (s.forward, s.backward_input, s.backward_weight) == pytest.approx((x.forward * k, x.backward_input * k,
                                                                                  x.backward_weight))
    cluster = default_cluster(config, DEVICES["h100"], devices=2, microbatches=4)
    assert plan_lower_bound(layers, cluster, 4).value < plan_lower_bound(
        [x.__class__(**{**vars(x), "comm": None}) for x in layers], cluster, 4).value


def test_a_v_plan_of_a_moe_model_is_valid_and_beats_the_rules(small) -> None:  # noqa: ANN001
    """V placement (DualPipe-V can pair there): the plan validates, fits memory, is no slower than any
    hand rule and meets its own lower bound from above."""
    model, config = small
    cluster = default_cluster(config, DEVICES["h100"], devices=2, microbatches=4, stages_per_device=2, placement="v")
    result = plan(model, cluster, "auto", time_limit_s=3)
    assert result.schedule is not None and not validate(result.schedule)
    assert result.problem.costs.overlap_fb is not None
    assert all(peak <= cluster.memory(d) + 1e-9 for d, peak in enumerate(result.peak_memory))
    steps = [b.step_time for b in result.baselines if b.step_time is not None]
    assert steps and result.step_time <= min(steps) + 1e-9
    assert result.lower_bound <= result.step_time + 1e-9
    assert "m" in result.exports.megatron_layout

"""``model hf`` against transformers itself: each supported family's model built from its config on the
meta device (no weights, no download), counted layer by layer, and the FLOPs held against
``6 · active parameters · tokens`` plus the attention core.

transformers is a test-only dependency (the ``dev`` extra). Without torch these tests skip, except with
``PIPESCHED_REQUIRE_TORCH=1`` (as ``.ci/run`` sets), where a missing torch or transformers fails the run.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from requires import require

from pipesched.solver.costmodel import DEVICES
from pipesched.solver.costmodel.hf_config import FAMILIES, read_config
from pipesched.solver.costmodel.hf_model import hf_model, run_config
from pipesched.solver.costmodel.moe import active_parameters, block_flops, core_flops_per_token

torch = require("torch")  # transformers builds its models with torch (the runtime extra)
transformers = require("transformers")

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "examples" / "hf").glob("*.json"))


def _variants() -> dict[str, dict[str, Any]]:
    """The example configs, plus the layer-kind rules their published values leave unused."""
    out = {p.stem: json.loads(p.read_text()) for p in CONFIGS}
    qwen = json.loads((CONFIGS[0].parent / "qwen1.5_moe_a2.7b.json").read_text())
    out["qwen2_moe sparse step 2, mlp_only_layers"] = {**qwen, "num_hidden_layers": 8, "decoder_sparse_step": 2,
                                                       "mlp_only_layers": [3]}
    qwen3 = json.loads((CONFIGS[0].parent / "qwen3_30b_a3b.json").read_text())
    out["qwen3_moe without head_dim, mlp_only_layers"] = {
        **{k: v for k, v in qwen3.items() if k != "head_dim"}, "num_hidden_layers": 4, "mlp_only_layers": [0, 2]}
    return out


VARIANTS = _variants()


@cache
def built(name: str) -> tuple[Any, list[int], int, int | None]:
    """(transformers model, its per-layer counts, its total, the MTP modules' own count or None)."""
    data = VARIANTS[name]
    config = transformers.AutoConfig.for_model(**data)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
        mtp = None
        if data.get("num_nextn_predict_layers"):
            from transformers.modeling_layers import MtpModel
            mtp_model = MtpModel(model, data["num_nextn_predict_layers"])
            mtp = sum(p.numel() for p in mtp_model.layers.parameters())
    per_layer = [sum(p.numel() for p in layer.parameters()) for layer in model.model.layers]
    return model, per_layer, sum(p.numel() for p in model.parameters()), mtp


def _ours(name: str):  # noqa: ANN202 - a Model
    arch = read_config(VARIANTS[name])
    return arch, hf_model(arch, run_config(arch, seq=4096, microbatch_size=1), DEVICES["h100"])


def test_every_family_has_an_example() -> None:
    assert {read_config(json.loads(p.read_text())).family for p in CONFIGS} == set(FAMILIES)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_parameter_counts_match_transformers(name: str) -> None:
    """Per layer within 1%, in total within 0.5% (they come out exact); DeepSeek-V3's MTP module is
    transformers' ``MtpModel`` layer, which transformers keeps apart from the causal LM."""
    model, per_layer, total, mtp = built(name)
    arch, ours = _ours(name)
    blocks = [x for x in ours.expanded() if x.kind.startswith("block")]
    by_name = {x.name: x for x in ours.layers}
    counts = [by_name[x.kind].parameters for x in blocks]
    assert len(counts) == len(per_layer)
    off = [(i, a, b) for i, (a, b) in enumerate(zip(counts, per_layer, strict=True)) if abs(a - b) > 0.01 * b]
    assert not off, f"layers (index, ours, transformers) beyond 1%: {off[:5]}"
    assert by_name["embed"].parameters == model.get_input_embeddings().weight.numel()
    head_tf = model.model.norm.weight.numel() + (0 if arch.tied_embeddings else model.lm_head.weight.numel())
    assert by_name["head"].parameters == head_tf
    main_total = sum((x.parameters or 0) * x.repeat for x in ours.layers if x.name != "mtp")
    assert abs(main_total - total) <= 0.005 * total
    if mtp is not None:
        assert abs(by_name["mtp"].parameters * by_name["mtp"].repeat - mtp) <= 0.01 * mtp


def _matmul_active(layer: Any, top_k: int, experts: int) -> float:
    """A transformers layer's 2-D weights one token passes through: routed experts' stacked weights
    (3-D, one slice per expert) count ``top_k / experts`` of theirs."""
    total = 0.0
    for p in layer.parameters():
        if p.dim() == 3:
            total += p.numel() * top_k / experts
        elif p.dim() == 2:
            total += p.numel()
    return total


@pytest.mark.parametrize("name", ["deepseek_v3", "qwen3_30b_a3b", "mixtral_8x7b", "qwen1.5_moe_a2.7b",
                                  "deepseek_v2_lite", "llama3.1_8b", "gemma2_9b"])
def test_flops_are_six_active_parameters_per_token_plus_attention(name: str) -> None:
    """F + B + W of every block = 6 · n · (its active weights, from transformers) + 3 · the attention
    core's forward (twice in B, not in W), within 1%."""
    model, _, _, _ = built(name)
    arch = read_config(VARIANTS[name])
    n, s = 4096, 4096
    moe = arch.moe
    for i, kind in enumerate(arch.kinds):
        f, b, w = block_flops(arch, kind, n, s)
        active = _matmul_active(model.model.layers[i], moe.top_k if moe else 0, moe.experts if moe else 1)
        expected = 6 * n * active + 3 * core_flops_per_token(arch, s) * n
        assert f + b + w == pytest.approx(expected, rel=0.01), (i, kind)
        assert active_parameters(arch, kind) == pytest.approx(active, rel=0.01)  # ours counts biases too


def test_published_active_sizes() -> None:
    """DeepSeek-V3: 37B activated per token; Qwen3-30B-A3B: 3.3B; Mixtral 8x7B: 12.9B (each model's
    own announcement), counted as attention + router + shared + top-k experts over the blocks, plus
    embedding and head."""
    for name, published in (("deepseek_v3", 37e9), ("qwen3_30b_a3b", 3.3e9), ("mixtral_8x7b", 12.9e9)):
        arch, ours = _ours(name)
        blocks = sum(active_parameters(arch, k) for k in arch.kinds)
        outer = sum(x.parameters for x in ours.layers if x.name in ("embed", "head"))
        assert blocks + outer == pytest.approx(published, rel=0.03), name

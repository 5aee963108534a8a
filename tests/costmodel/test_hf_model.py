"""``pipesched model hf``: config.json files as the Hub has them into a Model, and the MoE targets.

The counts against transformers itself are in test_hf_transformers.py; this file needs no torch."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipesched.solver.costmodel import DEVICES, TransformerConfig, transformer_model
from pipesched.solver.costmodel.cli import add_parser
from pipesched.solver.costmodel.hf_config import FAMILIES, ConfigError, read_config
from pipesched.solver.costmodel.hf_model import hf_model, run_config
from pipesched.solver.costmodel.moe import active_parameters, routed_parameters
from pipesched.solver.planning import Cluster, Model

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "hf"


def config(name: str, **changes: Any) -> dict[str, Any]:
    data = json.loads((EXAMPLES / f"{name}.json").read_text())
    return {k: v for k, v in {**data, **changes}.items() if v is not ...}


def model(data: dict[str, Any], ep: int = 1, **run: Any) -> Model:
    arch = read_config(data)
    return hf_model(arch, run_config(arch, **{"seq": 4096, "microbatch_size": 1, **run}), DEVICES["h100"], ep)


def layer(m: Model, name: str):  # noqa: ANN201 - a Layer
    return next(x for x in m.layers if x.name == name)


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="pipesched")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["model", "hf", *argv])
    return args.handler(args)


def test_a_dense_llama_is_the_model_transformer_writes() -> None:
    expected = transformer_model(TransformerConfig(hidden=4096, layers=32, heads=32, kv_heads=8, ffn=14336, vocab=128256,
                                                   seq=4096, microbatch_size=1), DEVICES["h100"])
    assert model(config("llama3.1_8b")) == expected


def test_deepseek_v3_layers_in_model_order() -> None:
    m = model(config("deepseek_v3"))
    assert [(x.name, x.repeat) for x in m.layers] == [("embed", 1), ("block.dense", 3), ("block.moe", 58), ("mtp", 1),
                                                      ("head", 1)]
    assert "mtp" in layer(m, "mtp").name
    assert sum(x.parameters * x.repeat for x in m.layers if x.name != "mtp") == 671_026_404_352  # the report's 671B


def test_a_moe_block_costs_about_a_dense_block_of_its_active_size() -> None:
    """DeepSeek-V3 at tp = ep = 1: its dense blocks (F = 18432 = (1 shared + 8 routed) x 2048) have the
    MoE blocks' active size and the same attention; a MoE forward is 0.8-1.3x a dense one."""
    m = model(config("deepseek_v3"))
    ratio = layer(m, "block.moe").forward / layer(m, "block.dense").forward
    assert 0.8 <= ratio <= 1.3
    assert layer(m, "block.moe").comm is None  # no expert parallelism, no all-to-all


@pytest.mark.parametrize("name", ["deepseek_v3", "qwen3_30b_a3b", "mixtral_8x7b"])
def test_ep_8_cuts_a_moe_blocks_static_memory_at_least_4x(name: str) -> None:
    """Without ZeRO. With ZeRO-1 over the same 8 data-parallel ranks the experts' optimizer state was
    already sharded 8 ways and expert parallelism takes those ranks, so the cut is smaller, but a cut."""
    one, eight = (layer(model(config(name), ep, dp=8), "block.moe").static for ep in (1, 8))
    assert one / eight >= 4
    one, eight = (layer(model(config(name), ep, dp=8, zero=1), "block.moe").static for ep in (1, 8))
    assert one / eight > 2


def test_the_all_to_all_is_in_f_and_b_and_slower_across_nodes() -> None:
    """ep = 8 fits one node (NVLink); ep = 64 spans eight (InfiniBand): the same bytes take longer."""
    inside, across = (layer(model(config("deepseek_v3"), ep, dp=64), "block.moe") for ep in (8, 64))
    plain = layer(model(config("deepseek_v3"), 1, dp=64), "block.moe")
    for x in (inside, across):
        assert x.comm is not None and x.comm.forward == x.comm.backward_input > 0
        assert x.forward == pytest.approx(plain.forward + x.comm.forward)
        assert x.backward_weight == plain.backward_weight  # W has no all-to-all
    assert across.comm.forward > 3 * inside.comm.forward


def test_keys_differ_by_transformers_version() -> None:
    """num_local_experts / num_experts, num_nextn_predict_layers / num_mtp_layers, head_dim given or
    implied, rope_theta or rope_parameters (neither counts)."""
    mixtral = config("mixtral_8x7b")
    renamed = {**{k: v for k, v in mixtral.items() if k != "num_local_experts"}, "num_experts": 8}
    assert read_config(renamed) == read_config(mixtral)
    ds = config("deepseek_v3")
    v5 = {**{k: v for k, v in ds.items() if k not in ("num_nextn_predict_layers", "rope_theta")}, "num_mtp_layers": 1,
          "rope_parameters": {"rope_theta": 10000, "rope_type": "yarn"}}
    assert read_config(v5) == read_config(ds)
    qwen = config("qwen3_30b_a3b")
    assert read_config(qwen).attention.head_dim == 128  # given, though hidden / heads = 64
    assert read_config(config("qwen3_30b_a3b", head_dim=...)).attention.head_dim == 64  # implied
    assert read_config(config("qwen3_8b", head_dim=..., hidden_size=2048)).attention.head_dim == 128  # Qwen3's default
    llama = config("llama2_7b")
    assert read_config(llama).attention.head_dim == 128  # implied: 4096 / 32


def test_family_defaults_for_keys_a_file_leaves_out() -> None:
    gemma = read_config(config("gemma_7b"))  # no tie_word_embeddings key: Gemma ties
    assert gemma.tied_embeddings and gemma.norms_per_block == 2
    assert read_config(config("qwen2.5_7b")).attention.qkv_bias  # Qwen2 always biases q, k, v
    assert not read_config(config("llama2_7b")).tied_embeddings


def test_qwen_moe_layer_rules() -> None:
    """Layer i is MoE when (i + 1) % decoder_sparse_step == 0 and i is not in mlp_only_layers."""
    arch = read_config(config("qwen1.5_moe_a2.7b", num_hidden_layers=6, decoder_sparse_step=2, mlp_only_layers=[3]))
    assert arch.kinds == ("dense", "moe", "dense", "dense", "dense", "moe")
    m = hf_model(arch, run_config(arch, seq=1024, microbatch_size=1), DEVICES["h100"])
    assert [(x.name, x.repeat) for x in m.layers] == [
        ("embed", 1), ("block.dense", 1), ("block.moe", 1), ("block.dense", 3), ("block.moe", 1), ("head", 1)]


@pytest.mark.parametrize(("data", "message"), [
    ({"model_type": "phi3"}, "model_type: 'phi3' is not supported (supported: llama, "),
    ({"hidden_size": 8}, "model_type: missing"),
    ({"model_type": "llama", "hidden_size": 4096}, "num_hidden_layers: missing: the file must give it "
                                                   "(model_type 'llama')"),
    ({**json.loads((EXAMPLES / "mixtral_8x7b.json").read_text()), "num_local_experts": None},
     "num_local_experts: missing (or num_experts)"),
    ({**json.loads((EXAMPLES / "llama2_7b.json").read_text()), "num_key_value_heads": 5},
     "num_key_value_heads: 5 does not divide num_attention_heads 32"),
    ({**json.loads((EXAMPLES / "llama2_7b.json").read_text()), "num_hidden_layers": "32"},
     "num_hidden_layers: must be a positive integer (got '32')"),
])
def test_a_config_it_cannot_read_is_one_line_naming_the_key(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        read_config(data, "c.json")
    assert message in str(e.value) and "\n" not in str(e.value)


def test_cli_writes_model_and_cluster(tmp_path: Path) -> None:
    out, cluster = tmp_path / "m.json", tmp_path / "c.json"
    assert cli(str(EXAMPLES / "qwen3_30b_a3b.json"), "--seq", "4096", "--microbatch-size", "1", "--device", "h100",
               "--ep", "8", "--dp", "8", "--zero", "1", "-o", str(out), "--cluster-output", str(cluster),
               "--devices", "8", "--microbatches", "32") == 0
    written = Model.model_validate_json(out.read_text())
    assert written == model(config("qwen3_30b_a3b"), 8, dp=8, zero=1)
    assert "comm" in out.read_text() and '"parameters": 311164928' in out.read_text()  # the embedding, 151936 x 2048
    assert Cluster.model_validate_json(cluster.read_text()).devices == 8


def test_cli_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"model_type": "gpt2", "n_embd": 768}))
    proc = subprocess.run([sys.executable, "-m", "pipesched.cli", "model", "hf", str(bad), "--seq", "1024",
                           "--microbatch-size", "1", "--device", "h100", "-o", str(tmp_path / "m.json")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and not (tmp_path / "m.json").exists()
    assert proc.stderr.splitlines() == [f"pipesched: error: {bad}: model_type: 'gpt2' is not supported "
                                        f"(supported: {', '.join(FAMILIES)})"]
    for argv, message in (((str(EXAMPLES / "llama2_7b.json"), "--ep", "2", "--dp", "2"), "has no experts"),
                          ((str(EXAMPLES / "deepseek_v3.json"), "--ep", "64"), "needs --dp a multiple of it"),
                          ((str(tmp_path / "absent.json"),), "cannot read")):
        assert cli(*argv, "--seq", "1024", "--microbatch-size", "1", "--device", "h100",
                   "-o", str(tmp_path / "m.json")) == 2, message


def test_help_lists_the_supported_families() -> None:
    proc = subprocess.run([sys.executable, "-m", "pipesched.cli", "model", "hf", "--help"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and all(f"  {family} " in proc.stdout for family in FAMILIES)


def test_the_deepseek_v3_figures_in_docs_costs_are_the_commands() -> None:
    """Every figure docs/costs.md quotes for DeepSeek-V3 (EP 64, ZeRO-1 over 128) is what the code gives."""
    doc = (EXAMPLES.parents[1] / "docs" / "costs.md").read_text()
    arch = read_config(config("deepseek_v3"))
    m = model(config("deepseek_v3"), 64, dp=128, zero=1)
    moe = layer(m, "block.moe")
    quoted = {f"{moe.parameters / 1e9:.2f}B parameters", f"{routed_parameters(arch, 'moe') / 1e9:.2f}B of them",
              f"{active_parameters(arch, 'moe') / 1e6:.1f}M active", f"{active_parameters(arch, 'dense') / 1e6:.1f}M",
              f"{moe.comm.forward / 2:.2f} ms", f"**{moe.forward:.1f} ms**", f"B =\n{moe.backward_input:.1f} ms",
              f"W = {moe.backward_weight:.1f} ms", f"{moe.static:.2f} GiB per block",
              f"activations {moe.memory.forward:.2f} GiB"}
    missing = [q for q in quoted if q not in doc]
    assert not missing, missing

"""A Hugging Face ``config.json`` read as the Hub has it, normalised into one architecture record.

Keys differ by family and by transformers version: ``num_experts`` or ``num_local_experts``,
``num_nextn_predict_layers`` or ``num_mtp_layers``, ``rope_theta`` or ``rope_parameters`` (neither
changes a count), ``head_dim`` given or implied (``hidden_size / num_attention_heads``), and
optional keys whose default is the family's own (``tie_word_embeddings`` is on for Gemma, off for
Llama; Qwen2's q/k/v always carry a bias). Each family below names its required keys and the
defaults its transformers configuration class uses, so a file that omits an optional key reads as
transformers would read it, and one that lacks a required key is refused naming it. No network: the
file is all there is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Attention:
    """Self-attention of a block. Grouped-query: ``heads`` query heads of ``head_dim``, ``kv_heads``
    key/value heads. Multi-head latent attention (MLA, DeepSeek-V2/V3) when ``kv_lora_rank > 0``:
    queries through an optional low-rank ``q_lora_rank``, keys and values from one ``kv_lora_rank``
    latent, each head ``qk_nope_head_dim + qk_rope_head_dim`` wide for q·k and ``v_head_dim`` for v."""

    heads: int
    kv_heads: int
    head_dim: int
    qkv_bias: bool = False
    o_bias: bool = False
    qk_norm: bool = False  # RMSNorm over head_dim on q and k (Qwen3, Gemma 3)
    q_lora_rank: int | None = None
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0

    @property
    def mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def qk_dim(self) -> int:
        """Width of one head in the scores ``q·k``."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.mla else self.head_dim

    @property
    def v_dim(self) -> int:
        """Width of one head's values (and of its slice of the context)."""
        return self.v_head_dim if self.mla else self.head_dim


@dataclass(frozen=True)
class Mlp:
    """The feed-forward part of a block: dense (``experts == 0``, width ``ffn``) or mixture-of-experts
    (``experts`` routed experts of width ``expert_ffn``, ``top_k`` per token, a router ``h × experts``,
    shared experts of total width ``shared_ffn`` that every token passes, optionally gated by a
    ``h × 1`` sigmoid as in Qwen2-MoE). Every matrix is gated (SwiGLU / GeGLU: gate, up, down)."""

    ffn: int = 0
    bias: bool = False
    experts: int = 0
    top_k: int = 0
    expert_ffn: int = 0
    shared_ffn: int = 0
    shared_gate: bool = False

    @property
    def moe(self) -> bool:
        return self.experts > 0


@dataclass(frozen=True)
class Architecture:
    """What planning needs from a config: the block kinds in model order (``kinds[i]`` is ``"dense"``
    or ``"moe"``), their shared attention, the norms per block (2, or 4 for Gemma 2/3), whether the
    LM head reuses the embedding, and how many multi-token-prediction modules follow (DeepSeek-V3)."""

    family: str
    hidden: int
    vocab: int
    attention: Attention
    dense: Mlp
    moe: Mlp | None
    kinds: tuple[str, ...]
    norms_per_block: int = 2
    tied_embeddings: bool = False
    mtp_layers: int = 0

    @property
    def layers(self) -> int:
        return len(self.kinds)


class ConfigError(ValueError):
    """A config.json that cannot be read: the message names the file, the key and the reason."""


class _Keys:
    """Typed look-ups in one config dict; every refusal names the key and the family."""

    def __init__(self, data: dict[str, Any], where: str, family: str) -> None:
        self.data, self.where, self.family = data, where, family

    def _fail(self, key: str, reason: str) -> ConfigError:
        return ConfigError(f"{self.where}: {key}: {reason} (model_type {self.family!r})")

    def get(self, *names: str, default: Any = ..., kind: type = int) -> Any:
        """The first of ``names`` present (aliases across transformers versions), else ``default``
        (``...``: required). Integers must be positive unless the default is 0."""
        for name in names:
            if name in self.data and self.data[name] is not None:
                value = self.data[name]
                break
        else:
            if default is ...:
                alias = f" (or {', '.join(names[1:])})" if len(names) > 1 else ""
                raise self._fail(names[0], f"missing{alias}: the file must give it")
            return default
        if kind is bool:
            if not isinstance(value, bool):
                raise self._fail(name, f"must be true or false (got {value!r})")
        elif kind is int:
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if default == 0 else 1):
                raise self._fail(name, f"must be a {'non-negative' if default == 0 else 'positive'} integer "
                                       f"(got {value!r})")
        elif kind is list and (not isinstance(value, list)
                               or not all(isinstance(x, int) and not isinstance(x, bool) for x in value)):
            raise self._fail(name, f"must be a list of layer indices (got {value!r})")
        return value


def _gqa(k: _Keys, *, kv_default: int | None = None, head_dim_default: int | None = None, bias: str | None = None,
         qkv_bias: bool = False, qk_norm: bool = False) -> Attention:
    heads = k.get("num_attention_heads")
    kv = k.get("num_key_value_heads", default=kv_default if kv_default is not None else heads)
    hidden = k.get("hidden_size")
    implied = head_dim_default if head_dim_default is not None else None
    if implied is None:
        if hidden % heads:
            raise k._fail("head_dim", f"missing, and hidden_size {hidden} is not a multiple of "
                                      f"num_attention_heads {heads}, so it is not implied")
        implied = hidden // heads
    head_dim = k.get("head_dim", default=implied)
    if heads % kv:
        raise k._fail("num_key_value_heads", f"{kv} does not divide num_attention_heads {heads}")
    with_bias = k.get(bias, default=False, kind=bool) if bias else False
    return Attention(heads=heads, kv_heads=kv, head_dim=head_dim, qkv_bias=qkv_bias or with_bias,
                     o_bias=with_bias, qk_norm=qk_norm)


def _mla(k: _Keys) -> Attention:
    heads = k.get("num_attention_heads")
    with_bias = k.get("attention_bias", default=False, kind=bool)
    return Attention(heads=heads, kv_heads=heads, head_dim=k.get("qk_nope_head_dim") + k.get("qk_rope_head_dim"),
                     qkv_bias=with_bias, o_bias=with_bias, q_lora_rank=k.get("q_lora_rank", default=None),
                     kv_lora_rank=k.get("kv_lora_rank"), qk_nope_head_dim=k.get("qk_nope_head_dim"),
                     qk_rope_head_dim=k.get("qk_rope_head_dim"), v_head_dim=k.get("v_head_dim"))


def _dense(k: _Keys, *, mlp_bias: bool = False, tied: bool = False, kv_default: int | None = None,
           head_dim_default: int | None = None, qkv_bias: bool = False, bias: str | None = "attention_bias",
           qk_norm: bool = False, norms: int = 2) -> dict[str, Any]:
    """The fields every family shares, for a dense decoder."""
    layers = k.get("num_hidden_layers")
    return dict(hidden=k.get("hidden_size"), vocab=k.get("vocab_size"),
                attention=_gqa(k, kv_default=kv_default, head_dim_default=head_dim_default, bias=bias,
                               qkv_bias=qkv_bias, qk_norm=qk_norm),
                dense=Mlp(ffn=k.get("intermediate_size"),
                          bias=k.get("mlp_bias", default=False, kind=bool) if mlp_bias else False),
                moe=None, kinds=("dense",) * layers, norms_per_block=norms,
                tied_embeddings=k.get("tie_word_embeddings", default=tied, kind=bool))


def _llama(k: _Keys) -> dict[str, Any]:
    return _dense(k, mlp_bias=True)


def _mistral(k: _Keys) -> dict[str, Any]:
    return _dense(k, kv_default=8, bias=None)


def _qwen2(k: _Keys) -> dict[str, Any]:
    return _dense(k, kv_default=k.get("num_attention_heads"), qkv_bias=True, bias=None)


def _qwen3(k: _Keys) -> dict[str, Any]:
    return _dense(k, head_dim_default=128, qk_norm=True)


def _gemma(norms: int, qk_norm: bool) -> Callable[[_Keys], dict[str, Any]]:
    def read(k: _Keys) -> dict[str, Any]:
        return _dense(k, tied=True, head_dim_default=256, qk_norm=qk_norm, norms=norms)
    return read


def _mixtral(k: _Keys) -> dict[str, Any]:
    out = _dense(k, kv_default=8, bias=None)
    moe = Mlp(experts=k.get("num_local_experts", "num_experts"), top_k=k.get("num_experts_per_tok", default=2),
              expert_ffn=k.get("intermediate_size"))
    return {**out, "moe": moe, "kinds": ("moe",) * len(out["kinds"])}


def _sparse_step_kinds(k: _Keys, layers: int, experts: int) -> tuple[str, ...]:
    """Qwen2/3-MoE's rule: layer ``i`` is MoE unless listed in ``mlp_only_layers``, when
    ``(i + 1) % decoder_sparse_step == 0``."""
    step = k.get("decoder_sparse_step", default=1)
    dense_only = set(k.get("mlp_only_layers", default=[], kind=list))
    return tuple("moe" if i not in dense_only and experts > 0 and (i + 1) % step == 0 else "dense"
                 for i in range(layers))


def _qwen2_moe(k: _Keys) -> dict[str, Any]:
    out = _dense(k, kv_default=k.get("num_attention_heads"), qkv_bias=k.get("qkv_bias", default=True, kind=bool),
                 bias=None)
    experts = k.get("num_experts", "num_local_experts", default=60)
    shared = k.get("shared_expert_intermediate_size", default=5632)
    moe = Mlp(experts=experts, top_k=k.get("num_experts_per_tok", default=4),
              expert_ffn=k.get("moe_intermediate_size", default=1408), shared_ffn=shared, shared_gate=shared > 0)
    return {**out, "moe": moe, "kinds": _sparse_step_kinds(k, len(out["kinds"]), experts)}


def _qwen3_moe(k: _Keys) -> dict[str, Any]:
    out = _dense(k, qk_norm=True)
    experts = k.get("num_experts", "num_local_experts", default=128)
    moe = Mlp(experts=experts, top_k=k.get("num_experts_per_tok", default=8),
              expert_ffn=k.get("moe_intermediate_size", default=768))
    return {**out, "moe": moe, "kinds": _sparse_step_kinds(k, len(out["kinds"]), experts)}


def _deepseek(mtp: bool) -> Callable[[_Keys], dict[str, Any]]:
    """DeepSeek-V2/V3: MLA everywhere; layer ``i`` is MoE when ``i >= first_k_dense_replace`` and
    ``i % moe_layer_freq == 0`` (DeepSeek's own modelling code; every published config has freq 1)."""
    def read(k: _Keys) -> dict[str, Any]:
        layers = k.get("num_hidden_layers")
        first, freq = k.get("first_k_dense_replace", default=0), k.get("moe_layer_freq", default=1)
        experts = k.get("n_routed_experts", "num_local_experts")
        moe = Mlp(experts=experts, top_k=k.get("num_experts_per_tok"), expert_ffn=k.get("moe_intermediate_size"),
                  shared_ffn=k.get("n_shared_experts", default=0) * k.get("moe_intermediate_size"))
        return dict(hidden=k.get("hidden_size"), vocab=k.get("vocab_size"), attention=_mla(k),
                    dense=Mlp(ffn=k.get("intermediate_size")), moe=moe,
                    kinds=tuple("moe" if i >= first and i % freq == 0 else "dense" for i in range(layers)),
                    tied_embeddings=k.get("tie_word_embeddings", default=False, kind=bool),
                    mtp_layers=k.get("num_nextn_predict_layers", "num_mtp_layers", default=0) if mtp else 0)
    return read


#: model_type -> (what it is, reader). ``pipesched model hf --help`` lists these.
FAMILIES: dict[str, tuple[str, Callable[[_Keys], dict[str, Any]]]] = {
    "llama": ("Llama 2 / 3 / 3.1 / 3.2 / 3.3", _llama),
    "mistral": ("Mistral 7B, Mistral-Nemo", _mistral),
    "qwen2": ("Qwen2 / Qwen2.5 (q/k/v biases)", _qwen2),
    "qwen3": ("Qwen3 dense (q/k norms)", _qwen3),
    "gemma": ("Gemma (tied embeddings)", _gemma(2, False)),
    "gemma2": ("Gemma 2 (tied, four norms per block)", _gemma(4, False)),
    "gemma3_text": ("Gemma 3 text (tied, four norms, q/k norms)", _gemma(4, True)),
    "mixtral": ("Mixtral (MoE)", _mixtral),
    "qwen2_moe": ("Qwen1.5-MoE / Qwen2-MoE (shared expert, decoder_sparse_step, mlp_only_layers)", _qwen2_moe),
    "qwen3_moe": ("Qwen3-MoE (decoder_sparse_step, mlp_only_layers)", _qwen3_moe),
    "deepseek_v2": ("DeepSeek-V2 (MLA, shared experts, first_k_dense_replace)", _deepseek(mtp=False)),
    "deepseek_v3": ("DeepSeek-V3 / R1 (MLA, shared experts, multi-token prediction)", _deepseek(mtp=True)),
}


def read_config(data: dict[str, Any], where: str = "config.json") -> Architecture:
    """The :class:`Architecture` of a parsed config.json; :class:`ConfigError` names what is wrong."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: must be a JSON object (got {type(data).__name__})")
    family = data.get("model_type")
    if family not in FAMILIES:
        supported = ", ".join(FAMILIES)
        if family is None:
            raise ConfigError(f"{where}: model_type: missing (supported: {supported})")
        raise ConfigError(f"{where}: model_type: {family!r} is not supported (supported: {supported})")
    fields = FAMILIES[family][1](_Keys(data, where, family))
    return Architecture(family=family, **fields)


def load_config(path: str | Path) -> Architecture:
    """Read and normalise a config.json file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not JSON: {e.msg} at line {e.lineno} column {e.colno}") from e
    return read_config(data, str(path))

"""Per-block counts of a Hugging Face architecture: parameters, FLOPs, activations, all-to-all.

A block is its linear layers (each ``inputs × outputs``, optionally biased, grouped by the tensor
they read), its norms and its attention core. Everything follows from that list:

- **parameters**: ``Σ copies · (inputs · outputs + bias)`` plus the norms' weights; routed experts
  are ``E`` copies of their gate/up/down matrices.
- **active parameters per token**: the same sum with a routed expert counted ``top_k`` times instead
  of ``E`` (attention + router + shared experts + the chosen experts), as the DeepSeek-V3 report and
  Qwen3's "A3B" count them (norms aside).
- **FLOPs** (Narayanan et al. 2021, Kaplan et al. 2020): a matmul is ``2 · inputs · outputs`` per
  token that passes it, so F's matmuls are ``2 · n · active``, B's and W's the same again each; the
  attention core (no weights) is ``2 · s · A · (d_qk + d_v)`` per token in F (scores and context,
  the full square as PaLM counts it) and twice that in B. ``F + B + W = 6 · n · active + 3 · core``.
- **activations** tensor by tensor as Korthikanti et al. 2022 (§4.1) count them, for any linear
  layout: norm inputs, one input per linear group, the attention core's q/k/v, the gated MLPs'
  gate and up outputs, dropout masks; for a MoE block also the router's fp32 probabilities, the
  ``n · top_k`` dispatched tokens through their experts and the experts' outputs (the combine
  weights' gradient needs them). Until W each group's input and each linear's output gradient stay
  (the zero-bubble paper's ``M_W``).
- **all-to-all**: one dispatch and one combine per forward, their gradients in B, each moving
  ``n · top_k · h · e`` bytes (every routed copy of a token), of which ``(ep − g) / ep`` leave the
  node when the expert-parallel group of ``ep`` ranks spans nodes of ``g`` of its ranks (over the
  inter-node link), else ``(ep − 1) / ep`` over the node's link.
"""

from __future__ import annotations

from dataclasses import dataclass

from .hardware import LinkSpec
from .hf_config import Architecture, Mlp

#: GPUs per node: an expert-parallel group of ``ep × tp`` GPUs spans nodes beyond this.
GPUS_PER_NODE = 8


@dataclass(frozen=True)
class Linear:
    """One weight matrix (``copies`` of it for routed experts, ``tokens`` of them per token)."""

    group: str  # linears of one group read the same saved input
    inputs: int
    outputs: int
    bias: bool = False
    tokens: int = 1  # passes per token: top_k for a routed expert, else 1
    copies: int = 1  # instances in the model: E for a routed expert
    routed: bool = False

    @property
    def parameters(self) -> int:
        return self.copies * (self.inputs * self.outputs + (self.outputs if self.bias else 0))

    @property
    def active(self) -> int:
        """Parameters one token passes through (biases included)."""
        return self.tokens * (self.inputs * self.outputs + (self.outputs if self.bias else 0))

    @property
    def macs(self) -> int:
        """Multiply-adds per token: ``tokens · inputs · outputs``."""
        return self.tokens * self.inputs * self.outputs


def attention_linears(a: Architecture) -> list[Linear]:
    """Q, K, V, O of grouped-query attention, or MLA's down/up projections (DeepSeek-V2 §2.1)."""
    h, at = a.hidden, a.attention
    if not at.mla:
        return [Linear("x_attn", h, at.heads * at.head_dim, at.qkv_bias),
                Linear("x_attn", h, at.kv_heads * at.head_dim, at.qkv_bias),
                Linear("x_attn", h, at.kv_heads * at.head_dim, at.qkv_bias),
                Linear("o", at.heads * at.head_dim, h, at.o_bias)]
    q = ([Linear("x_attn", h, at.q_lora_rank, at.qkv_bias), Linear("q_b", at.q_lora_rank, at.heads * at.qk_dim)]
         if at.q_lora_rank else [Linear("x_attn", h, at.heads * at.qk_dim)])
    return [*q, Linear("x_attn", h, at.kv_lora_rank + at.qk_rope_head_dim, at.qkv_bias),
            Linear("kv_b", at.kv_lora_rank, at.heads * (at.qk_nope_head_dim + at.v_head_dim)),
            Linear("o", at.heads * at.v_head_dim, h, at.o_bias)]


def mlp_linears(h: int, m: Mlp) -> list[Linear]:
    """Gated MLP (gate and up as one ``h × 2F`` matrix), or router + shared experts + routed experts."""
    if not m.moe:
        return [Linear("x_mlp", h, 2 * m.ffn, m.bias), Linear("down", m.ffn, h, m.bias)]
    out = [Linear("x_mlp", h, m.experts)]  # the router
    if m.shared_ffn:
        out += [Linear("x_mlp", h, 2 * m.shared_ffn), Linear("shared_down", m.shared_ffn, h)]
    if m.shared_gate:
        out.append(Linear("x_mlp", h, 1))
    return out + [Linear("expert_in", h, 2 * m.expert_ffn, tokens=m.top_k, copies=m.experts, routed=True),
                  Linear("expert_down", m.expert_ffn, h, tokens=m.top_k, copies=m.experts, routed=True)]


def _mlp(a: Architecture, kind: str) -> Mlp:
    if kind == "moe":
        assert a.moe is not None
        return a.moe
    return a.dense


def block_linears(a: Architecture, kind: str) -> list[Linear]:
    return attention_linears(a) + mlp_linears(a.hidden, _mlp(a, kind))


def norm_parameters(a: Architecture) -> int:
    """Block norms (``norms_per_block × h``), MLA's latent norms, q/k norms over a head."""
    at = a.attention
    n = a.norms_per_block * a.hidden
    if at.mla:
        n += at.kv_lora_rank + (at.q_lora_rank or 0)
    if at.qk_norm:
        n += 2 * at.head_dim
    return n


def block_parameters(a: Architecture, kind: str) -> int:
    return sum(x.parameters for x in block_linears(a, kind)) + norm_parameters(a)


def routed_parameters(a: Architecture, kind: str) -> int:
    """The routed experts' share of :func:`block_parameters` (what expert parallelism shards)."""
    return sum(x.parameters for x in block_linears(a, kind) if x.routed)


def active_parameters(a: Architecture, kind: str) -> int:
    """Parameters one token passes through, norms aside: attention, router, shared, top-k experts."""
    return sum(x.active for x in block_linears(a, kind))


def core_flops_per_token(a: Architecture, seq: int) -> float:
    """Scores ``q·kᵀ`` and context ``P·v`` over the full ``s × s`` square: ``2·s·A·(d_qk + d_v)``."""
    at = a.attention
    return 2.0 * seq * at.heads * (at.qk_dim + at.v_dim)


def block_flops(a: Architecture, kind: str, tokens: int, seq: int) -> tuple[float, float, float]:
    """(F, B, W) FLOPs of one block for ``tokens`` tokens of sequences of ``seq``, all ranks together."""
    matmul = 2.0 * tokens * sum(x.macs for x in block_linears(a, kind))
    core = core_flops_per_token(a, seq) * tokens
    return matmul + core, matmul + 2 * core, matmul


def block_activations(a: Architecture, kind: str, tokens: int, seq: int, microbatch_size: int, e: int,
                      flash_attention: bool = True) -> tuple[float, float]:
    """(held after F, held after B until W) in bytes for ``tokens`` tokens on one rank without
    tensor parallelism (the module docstring lists the tensors). ``e`` bytes per element."""
    h, at, n = a.hidden, a.attention, tokens
    linears = block_linears(a, kind)
    groups: dict[str, int] = {}
    for x in linears:
        groups.setdefault(x.group, x.tokens * x.inputs)
    x = n * h
    held = a.norms_per_block * e * x + 2 * x  # norm inputs, two dropout masks (1 byte each)
    held += sum(e * n * width for width in groups.values())
    if at.mla:
        held += e * n * (at.kv_lora_rank + at.qk_rope_head_dim + (at.q_lora_rank or 0))  # latent norm inputs
        held += e * n * at.heads * (2 * at.qk_dim + at.v_dim)  # q, k, v as the core reads them
    else:
        held += e * n * (at.heads + 2 * at.kv_heads) * at.head_dim
        if at.qk_norm:
            held += e * n * (at.heads + at.kv_heads) * at.head_dim
    if not flash_attention:
        held += (2 * e + 1) * at.heads * seq * seq * microbatch_size
    m = _mlp(a, kind)
    held += 2 * e * n * (m.ffn + m.shared_ffn + m.top_k * m.expert_ffn)  # gate and up outputs
    if m.moe:
        held += 4 * n * m.experts + e * n * m.top_k * h  # router probabilities (fp32), expert outputs
        held += e * x if m.shared_gate else 0  # the shared expert's output, for its gate's gradient
    until_w = sum(e * n * width for width in groups.values()) + sum(e * n * w.tokens * w.outputs for w in linears)
    return float(held), float(until_w)


def all_to_all_ms(a: Architecture, tokens: int, e: int, tp: int, ep: int, node_link: LinkSpec,
                  inter_node: LinkSpec) -> float:
    """One all-to-all (dispatch, or combine) of a MoE block on one rank: ``n · top_k · h · e / tp``
    bytes (sequence parallelism splits the tokens over the TP ranks), the share that leaves the rank
    over the node's link, or, when the group spans nodes, the share that leaves the node over the
    inter-node link (the in-node share travels at the same time); plus one latency."""
    if ep <= 1 or a.moe is None:
        return 0.0
    volume = tokens * a.moe.top_k * a.hidden * e / tp
    in_node = max(1, min(ep, GPUS_PER_NODE // tp))
    if in_node >= ep:
        return node_link.latency_ms + volume * (ep - 1) / ep / (node_link.gbps * 1e9 / 8) * 1e3
    off = volume * (ep - in_node) / ep / (inter_node.gbps * 1e9 / 8) * 1e3
    on = volume * (in_node - 1) / ep / (node_link.gbps * 1e9 / 8) * 1e3
    return inter_node.latency_ms + max(off, on)

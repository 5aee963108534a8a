"""The planning :class:`Model` of a Hugging Face architecture (:mod:`.hf_config`), dense or MoE.

Layers in model order: ``embed``, one layer per run of equal blocks (``block`` for a dense model;
``block.dense`` and ``block.moe`` when both kinds occur, so the exports still see one family of
blocks), ``mtp`` (DeepSeek-V3's multi-token-prediction modules, before the loss as Megatron-LM
places them) and ``head``. Every layer carries ``parameters``, its count in the full unsharded model
(a shared matrix counted once: a tied head holds its final norm only, an MTP module its own weights).

Costs per microbatch on one of a stage's ``tp`` ranks, in ms and GiB, as :mod:`.transformer` does for
a dense block, with the block's counts from :mod:`.moe`. What is MoE-specific:

- time: the matmuls of the *active* parameters and the attention core at ``peak × MFU``; the
  permutation of the routed tokens (``2 · e · n · top_k · h / tp`` bytes read and written by permute
  and by unpermute) at the memory bandwidth; the expert-parallel all-to-all, dispatch and combine in
  F and their gradients in B (:func:`.moe.all_to_all_ms`), also given as the layer's ``comm``;
- static memory: the routed experts' parameters over ``tp · ep`` ranks with optimizer state sharded
  over the ``dp / ep`` expert-data-parallel ranks under ZeRO, everything else over ``tp`` with
  optimizer state over ``dp``;
- activations: the routed tokens' expert activations, ``top_k`` copies per token.

An embedding or head that a layer shares (a tied head, an MTP module's embedding and head) is held as
a copy on that layer's stage, so its static memory counts it (an upper bound when the owner shares the
device).
"""

from __future__ import annotations

import dataclasses
from itertools import groupby

from pipesched.solver.planning import Layer, LayerComm, Model, Recompute

from .hardware import GIB, LINKS, DeviceSpec
from .hf_config import Architecture
from .moe import (
    all_to_all_ms,
    block_activations,
    block_flops,
    block_parameters,
    routed_parameters,
)
from .transformer import (
    TransformerConfig,
    _deltas,
    embed_layer,
    head_activations,
    head_flops,
    head_layer,
    static_bytes_per_param,
    step_sizes,
)


def run_config(a: Architecture, *, seq: int, microbatch_size: int, tp: int = 1, dp: int = 1, zero: int = 0,
               dtype: str = "bf16", optimizer: str = "adam", flash_attention: bool = True) -> TransformerConfig:
    """The dense-transformer view of ``a`` that carries how it runs (its embedding, head, bytes per
    parameter and checks on ``tp`` / ``dp`` are the dense model's)."""
    at = a.attention
    return TransformerConfig(hidden=a.hidden, layers=a.layers, heads=at.heads, kv_heads=at.kv_heads,
                             ffn=max(1, a.dense.ffn), vocab=a.vocab, seq=seq, microbatch_size=microbatch_size,
                             tp=tp, dtype=dtype, flash_attention=flash_attention, optimizer=optimizer,  # type: ignore[arg-type]
                             zero=zero, dp=dp)


def check_ep(a: Architecture, c: TransformerConfig, ep: int) -> None:
    """Expert parallelism needs experts and ranks to spread them over (one line naming the flag)."""
    if ep < 1:
        raise ValueError(f"--ep must be a positive integer (got {ep})")
    if ep == 1:
        return
    if a.moe is None or "moe" not in a.kinds:
        raise ValueError(f"--ep {ep}: model_type {a.family!r} has no experts to spread")
    if a.moe.experts % ep:
        raise ValueError(f"--ep {ep} does not divide the {a.moe.experts} routed experts")
    if c.dp % ep:
        raise ValueError(f"--ep {ep} needs --dp a multiple of it: expert-parallel ranks are a stage's "
                         f"data-parallel ranks (got --dp {c.dp})")


def _block(a: Architecture, kind: str, repeat: int, name: str, c: TransformerConfig, ep: int,
           device: DeviceSpec) -> Layer:
    t, e, n = c.tp, c.element_bytes, c.tokens
    f, b, w = (device.matmul_ms(x / t) for x in block_flops(a, kind, n, c.seq))
    a2a = 2 * all_to_all_ms(a, n, e, t, ep, LINKS["nvlink"], LINKS["ib"]) if kind == "moe" else 0.0
    permute = device.memory_ms(4 * e * n * a.moe.top_k * a.hidden / t) if kind == "moe" and a.moe else 0.0
    held_f, held_w = (x / t for x in block_activations(a, kind, n, c.seq, c.microbatch_size, e, c.flash_attention))
    routed = routed_parameters(a, kind)
    total = block_parameters(a, kind)
    expert_bytes = static_bytes_per_param(dataclasses.replace(c, dp=c.dp // ep))
    static = ((total - routed) / t * static_bytes_per_param(c) + routed / (t * ep) * expert_bytes) / GIB
    dense, experts = step_sizes((total - routed) / t, c), step_sizes(routed / (t * ep), c, max(1, c.dp // ep))
    sizes = {k: dense[k] + experts[k] for k in dense}
    return Layer(name=name, repeat=repeat, forward=f + permute + a2a, backward_input=b + permute + a2a, **sizes,
                 backward_weight=w, memory=_deltas(held_f, held_w), static=static, output=e * n * a.hidden / t / GIB,
                 recompute=Recompute(memory=_deltas(e * n * a.hidden / t, held_w)), parameters=total,
                 comm=LayerComm(forward=a2a, backward_input=a2a) if a2a > 0 else None)


def _mtp(a: Architecture, c: TransformerConfig, ep: int, device: DeviceSpec) -> Layer:
    """A multi-token-prediction module (DeepSeek-V3 §2.2): norms of the next token's embedding and of
    the hidden state, a ``2h × h`` projection, one MoE block, a final norm and the shared head + loss.
    It passes the main model's hidden state on to the head unchanged."""
    h, t, e, n = a.hidden, c.tp, c.element_bytes, c.tokens
    block = _block(a, "moe" if a.moe else "dense", 1, "mtp", c, ep, device)
    proj = device.matmul_ms(2.0 * n * 2 * h * h / t)
    gather = device.memory_ms(2 * e * n * h / t)
    mm = device.matmul_ms(head_flops(c) / t)
    softmax = device.memory_ms((e + 4) * n * c.vocab / t)
    head_f, head_w = head_activations(c)
    held_f = block.memory.forward * GIB + (2 * e * n * h + 2 * e * n * 2 * h) / t + head_f + 8.0 * n
    held_w = -block.memory.backward_weight * GIB + (e * n * 2 * h + e * n * h) / t + head_w + 8.0 * n
    own = block_parameters(a, "moe" if a.moe else "dense") + 2 * h + 2 * h * h + h  # + enorm, hnorm, eh_proj, norm
    shared = 2 * a.vocab * h  # the embedding and head copies it reads
    static = block.static + (own - block.parameters + shared) / t * static_bytes_per_param(c) / GIB
    return block.model_copy(update={
        "repeat": a.mtp_layers, "forward": block.forward + proj + gather + mm + softmax,
        "backward_input": block.backward_input + proj + mm + softmax,
        "backward_weight": block.backward_weight + proj + mm + gather, "memory": _deltas(held_f, held_w),
        "static": static, "parameters": own,
        **{k: v + step_sizes((own - block.parameters + shared) / t, c)[k] for k, v in
           (("gradient", block.gradient), ("optimizer", block.optimizer))},
        "recompute": Recompute(memory=_deltas(e * n * h / t + 8.0 * n, held_w))})


def hf_model(a: Architecture, c: TransformerConfig, device: DeviceSpec, ep: int = 1) -> Model:
    """The :class:`Model` of ``a`` run as ``c`` (seq, microbatch size, tp, dp, ZeRO, dtype) with
    ``ep`` expert-parallel ranks, on ``device``."""
    check_ep(a, c, ep)
    mixed = len(set(a.kinds)) > 1 or a.kinds[0] == "moe"
    blocks = [_block(a, kind, len(list(run)), f"block.{kind}" if mixed else "block", c, ep, device)
              for kind, run in groupby(a.kinds)]
    mtp = [_mtp(a, c, ep, device)] if a.mtp_layers else []
    head = head_layer(c, device)  # static: a tied head keeps a copy of the embedding on its stage
    head = head.model_copy(update={"parameters": a.hidden + (0 if a.tied_embeddings else a.vocab * a.hidden)})
    return Model(layers=[embed_layer(c, device), *blocks, *mtp, head], microbatch_size=c.microbatch_size,
                 sequence_length=c.seq)

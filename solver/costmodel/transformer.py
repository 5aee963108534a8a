"""Analytic costs of a decoder-only transformer, written as a planning :class:`Model` (ms, GiB).

Three layers in model order: ``embed`` (token embedding), ``block`` (``repeat`` = L pre-norm
blocks of attention + MLP) and ``head`` (final norm, LM head, cross-entropy). Per microbatch of
``b`` sequences of ``s`` tokens, on one of the ``T`` tensor-parallel devices of a stage:

Time (FLOPs as in Narayanan et al. 2021 and the PaLM paper's MFU appendix, Chowdhery et al. 2022;
a matmul of an ``n×k`` by ``k×m`` is ``2nkm``; ``d = h/A`` the head size, ``K·d`` the K/V width):

- projections per token ``2·(2h² + 2h·K·d)`` (Q, O: ``h×h``; K, V: ``h×K·d``, GQA aware);
- attention core per token ``4·s·h`` (scores ``QKᵀ`` and context ``PV``, ``2·s·h`` each, the
  full square as PaLM counts it, causal or not);
- MLP per token ``6·h·F`` gated (gate, up, down) or ``4·h·F``; LM head ``2·h·V``.
- ``B`` (input gradient) and ``W`` (weight gradient) of a matmul cost one forward each; the
  attention core has no weights, its backward (``2×`` forward) is all in ``B`` (the zero-bubble
  paper's ``T_F = sbh(24h+4s)``, ``T_B = sbh(24h+8s)``, ``T_W = sbh·24h`` for ``F = 4h``).
- time = FLOPs / (T · peak · MFU); the embedding gather and the loss's softmax are memory bound
  and timed at the device's memory bandwidth.

Activation memory (Korthikanti et al. 2022, "Reducing activation recomputation", §4.1): per block
``s·b·h·(34 + 5·A·s/h)`` bytes with 16-bit activations and ``F = 4h`` (dropout masks included),
the ``5·A·s²·b`` attention-core term gone with flash attention, everything ``/T`` under tensor +
sequence parallelism. Counted tensor by tensor here so GQA, gated MLPs, any ``F`` and fp32 follow.
After ``B`` only what ``W`` needs stays (zero-bubble paper, Qi et al. 2023): the input of every
linear layer and the gradient of its output, ``32·s·b·h`` in the same configuration.

Static memory (ZeRO paper, Rajbhandari et al. 2020): per parameter 16-bit weight + 16-bit gradient
+ 12 bytes of Adam state (fp32 master, m, v); ZeRO stage 1 shards the optimizer state over the
``D`` data-parallel ranks, stage 2 the gradients too, stage 3 the weights as well.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pipesched.solver.planning import (
    Cluster,
    DataParallel,
    Layer,
    LayerMemory,
    Link,
    Model,
    Recompute,
)

from .hardware import DEVICES, GIB, LINKS, DeviceSpec, LinkSpec

__all__ = ["DEVICES", "LINKS", "DeviceSpec", "LinkSpec", "TransformerConfig", "default_cluster",
           "static_bytes_per_param", "transformer_model"]

Dtype = Literal["bf16", "fp16", "fp32"]
Optimizer = Literal["adam", "sgd"]
_DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
#: Optimizer state bytes per parameter: (with 16-bit training: fp32 master copy included, fp32 training).
_OPTIMIZER_BYTES = {"adam": (12, 8), "sgd": (8, 4)}  # adam: master + m + v; sgd: master + momentum


@dataclass(frozen=True)
class TransformerConfig:
    """A decoder-only transformer and how one microbatch of it is run.

    ``hidden`` h, ``layers`` L, ``heads`` A, ``kv_heads`` K (K < A: grouped-query attention),
    ``ffn`` F (the MLP's inner width), ``vocab`` V, ``seq`` s, ``microbatch_size`` b sequences,
    ``tp`` T tensor-parallel ranks per stage (with sequence parallelism), ``zero`` the ZeRO stage
    over ``dp`` data-parallel ranks.
    """

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    seq: int
    microbatch_size: int
    tp: int = 1
    dtype: Dtype = "bf16"
    flash_attention: bool = True
    gated_mlp: bool = True
    optimizer: Optimizer = "adam"
    zero: int = 0
    dp: int = 1

    def __post_init__(self) -> None:
        for field in ("hidden", "layers", "heads", "kv_heads", "ffn", "vocab", "seq", "microbatch_size",
                      "tp", "dp"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{field} must be a positive integer (got {value!r})")
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.heads % self.tp:
            raise ValueError(f"heads ({self.heads}) must be a multiple of tp ({self.tp}): "
                             "tensor parallelism splits the heads")
        if self.dtype not in _DTYPE_BYTES:
            raise ValueError(f"dtype must be one of {sorted(_DTYPE_BYTES)} (got {self.dtype!r})")
        if self.optimizer not in _OPTIMIZER_BYTES:
            raise ValueError(f"optimizer must be one of {sorted(_OPTIMIZER_BYTES)} (got {self.optimizer!r})")
        if self.zero not in (0, 1, 2, 3):
            raise ValueError(f"zero must be 0, 1, 2 or 3 (got {self.zero!r})")

    @property
    def tokens(self) -> int:
        """Tokens in one microbatch, ``s·b``."""
        return self.seq * self.microbatch_size

    @property
    def kv_width(self) -> float:
        """Width of the K (and of the V) projection, ``K·d = h·K/A``."""
        return self.hidden * self.kv_heads / self.heads

    @property
    def element_bytes(self) -> int:
        return _DTYPE_BYTES[self.dtype]


# ---------------------------------------------------------------- parameters and static memory
def block_params(c: TransformerConfig) -> float:
    """Parameters of one block: Q, O ``h²`` each, K, V ``h·K·d`` each, MLP ``3hF`` (gated) or
    ``2hF``, two norm weights ``h`` each (no biases, as in Llama)."""
    h = c.hidden
    return 2 * h * h + 2 * h * c.kv_width + (3 if c.gated_mlp else 2) * h * c.ffn + 2 * h


def embedding_params(c: TransformerConfig) -> float:
    return c.vocab * c.hidden


def head_params(c: TransformerConfig) -> float:
    """Final norm ``h`` and an untied output projection ``h·V``."""
    return c.hidden + c.vocab * c.hidden


def step_sizes(params: float, c: TransformerConfig, shards: int | None = None) -> dict[str, float]:
    """``gradient`` and ``optimizer`` (GiB) of ``params`` parameters held by one device: the gradient in
    the training dtype (what the data-parallel sync moves), and what the optimizer step reads and writes:
    its state twice, the gradient once, the weights once (twice in fp32, where the master copy is the
    weight), sharded over ``shards`` (default ``dp``) data-parallel ranks under ZeRO >= 1."""
    w = g = c.element_bytes
    o = _OPTIMIZER_BYTES[c.optimizer][0 if c.element_bytes < 4 else 1]
    traffic = 2 * o + g + (2 * w if c.element_bytes >= 4 else w)
    d = (c.dp if shards is None else shards) if c.zero >= 1 else 1
    return {"gradient": params * g / GIB, "optimizer": params * traffic / d / GIB}


def static_bytes_per_param(c: TransformerConfig) -> float:
    """Weights + gradients + optimizer state per parameter on one device: ``2 + 2 + 12`` bytes for
    mixed-precision Adam (ZeRO paper's ``K = 12``), the sharded parts divided by ``dp``."""
    w = g = c.element_bytes
    o = _OPTIMIZER_BYTES[c.optimizer][0 if c.element_bytes < 4 else 1]
    d = c.dp
    return {0: w + g + o, 1: w + g + o / d, 2: w + (g + o) / d, 3: (w + g + o) / d}[c.zero]


# ---------------------------------------------------------------- FLOPs per microbatch (whole stage, all T ranks)
def block_flops(c: TransformerConfig) -> tuple[float, float, float]:
    """(F, B, W) FLOPs of one block: matmuls once in each, the attention core ``4·s·h`` per token
    in F and twice that in B."""
    h, n = c.hidden, c.tokens
    matmul = 2 * n * (2 * h * h + 2 * h * c.kv_width) + 2 * n * (3 if c.gated_mlp else 2) * h * c.ffn
    core = 4 * n * c.seq * h
    return matmul + core, matmul + 2 * core, matmul


def head_flops(c: TransformerConfig) -> float:
    """FLOPs of the LM head's matmul, ``2·h·V`` per token (the same again in B and in W)."""
    return 2.0 * c.tokens * c.hidden * c.vocab


# ---------------------------------------------------------------- activation memory per microbatch (one rank)
def block_activations(c: TransformerConfig) -> tuple[float, float]:
    """(held after F, held after B until W) in bytes, tensor by tensor as Korthikanti et al.

    With ``e`` bytes per element, ``x = s·b·h``, ``y = s·b·F`` and ``r = K/A``: attention keeps the
    norm input, the QKV input, Q and the output projection's input (``4e·x``), K and V (``e·x·r``
    each) and a dropout mask (``x``); without flash attention also the softmax output, its dropout
    mask and the dropout output, ``(2e + 1)·A·s²·b``. The MLP keeps the norm input and its first
    input (``2e·x``), ``3e·y`` gated (gate, up, product) or ``2e·y``, and a mask ``x``. For
    ``e = 2, r = 1, F = 4h``, not gated: ``34·x + 5·A·s²·b``. W needs each linear layer's input and
    output gradient: ``32·x`` there.
    """
    e, x, y, r = c.element_bytes, c.tokens * c.hidden, c.tokens * c.ffn, c.kv_heads / c.heads
    attention = e * x * (4 + 2 * r) + x  # norm in, qkv in, q, k, v, proj in, mask
    if not c.flash_attention:
        attention += (2 * e + 1) * c.heads * c.seq * c.seq * c.microbatch_size
    mlp = 2 * e * x + (3 if c.gated_mlp else 2) * e * y + x
    qkv_w = e * x + e * x * (1 + 2 * r)
    proj_w = 2 * e * x
    mlp_w = (e * x + 2 * e * y) + (e * y + e * x) if c.gated_mlp else (e * x + e * y) + (e * y + e * x)
    return (attention + mlp) / c.tp, (qkv_w + proj_w + mlp_w) / c.tp


def head_activations(c: TransformerConfig) -> tuple[float, float]:
    """(after F, after B) bytes: norm and head inputs ``2e·s·b·h``, logits ``e·s·b·V`` and the
    loss's fp32 softmax ``4·s·b·V``; W keeps the head input and the logits' gradient."""
    e, n = c.element_bytes, c.tokens
    after_f = 2 * e * n * c.hidden + (e + 4) * n * c.vocab
    after_b = e * n * c.hidden + e * n * c.vocab
    return after_f / c.tp, after_b / c.tp


# ---------------------------------------------------------------- the Model
def _deltas(after_f: float, after_b: float) -> LayerMemory:
    """Event deltas (GiB) from what a layer holds after F and after B; W frees the rest."""
    return LayerMemory(forward=after_f / GIB, backward_input=(after_b - after_f) / GIB,
                       backward_weight=-after_b / GIB)


def embed_layer(c: TransformerConfig, device: DeviceSpec) -> Layer:
    """The token embedding: a gather read and written at the memory bandwidth (again for its weight
    gradient), the int64 token ids kept until W."""
    e, n, t = c.element_bytes, c.tokens, c.tp
    gather = device.memory_ms(2 * e * n * c.hidden / t)  # read the table rows, write the output
    token_ids = 8.0 * n  # int64 ids kept for the embedding's weight gradient
    return Layer(name="embed", forward=gather, backward_input=0.0, backward_weight=gather,
                 memory=_deltas(token_ids, token_ids), static=embedding_params(c) / t * static_bytes_per_param(c) / GIB,
                 output=e * n * c.hidden / t / GIB, parameters=round(embedding_params(c)),
                 **step_sizes(embedding_params(c) / t, c))


def head_layer(c: TransformerConfig, device: DeviceSpec) -> Layer:
    """Final norm, LM head and loss: the head's matmul in F, B and W, the loss's softmax at the
    memory bandwidth in F and B."""
    t = c.tp
    mm = device.matmul_ms(head_flops(c) / t)
    softmax = device.memory_ms((c.element_bytes + 4) * c.tokens * c.vocab / t)  # logits in, fp32 out (and back in B)
    head_f, head_w = head_activations(c)
    return Layer(name="head", forward=mm + softmax, backward_input=mm + softmax, backward_weight=mm,
                 memory=_deltas(head_f, head_w), static=head_params(c) / t * static_bytes_per_param(c) / GIB,
                 output=0.0, parameters=round(head_params(c)), **step_sizes(head_params(c) / t, c))


def transformer_model(config: TransformerConfig, device: DeviceSpec, link: LinkSpec | None = None) -> Model:
    """The :class:`Model` (ms, GiB, per microbatch, per tensor-parallel rank) of ``config`` on ``device``.

    ``link`` does not change the layers (comm lives in the :class:`Cluster`, see
    :func:`default_cluster`); it is accepted so one call site can describe the whole machine.
    """
    del link  # the model's layers do not depend on the link
    c, t = config, config.tp
    e, n = c.element_bytes, c.tokens
    sent = e * n * c.hidden / t / GIB  # the s·b·h activation between layers (sharded by sequence parallelism)
    f, b, w = (device.matmul_ms(x / t) for x in block_flops(c))
    held_f, held_w = block_activations(c)
    block = Layer(name="block", repeat=c.layers, forward=f, backward_input=b, backward_weight=w,
                  memory=_deltas(held_f, held_w), static=block_params(c) / t * static_bytes_per_param(c) / GIB,
                  output=sent, recompute=Recompute(memory=_deltas(sent * GIB, held_w)),
                  parameters=round(block_params(c)), **step_sizes(block_params(c) / t, c))
    return Model(layers=[embed_layer(c, device), block, head_layer(c, device)],
                 microbatch_size=c.microbatch_size, sequence_length=c.seq)


def default_cluster(config: TransformerConfig, device: DeviceSpec, link: LinkSpec | None = None, *,
                    devices: int, microbatches: int | list[int] | None = None, stages_per_device: int = 1,
                    placement: Literal["loop", "v"] = "loop",
                    objective: Literal["makespan", "stage_span"] = "makespan") -> Cluster:
    """The :class:`Cluster` of ``devices`` pipeline stages of ``device``: its full memory (the
    planner subtracts each stage's static memory), and ``link`` for comm. Without a link: 8-GPU nodes,
    ``8 // tp`` pipeline devices each, NVLink inside a node and InfiniBand between nodes. The step ends
    with the optimizer (streamed at the device's memory bandwidth) and, with ``dp > 1``, each stage's
    gradient sync over ``dp`` ranks (InfiniBand when the ``devices × tp × dp`` GPUs span nodes).
    Microbatches default to ``4 × devices`` (1F1B's bubble ``(p-1)/(m+p-1)`` is then 7/39 ≈ 18% at p = 8).
    """
    def of(spec: LinkSpec) -> Link:
        return Link(latency=spec.latency_ms, bandwidth=spec.gib_per_ms)

    topology: dict = {}
    if link is None:
        link = LINKS["nvlink"]
        topology = {"devices_per_node": max(1, 8 // config.tp), "inter_node_link": of(LINKS["ib"])}
    dp_link = LINKS["nvlink"] if devices * config.tp * config.dp <= 8 else LINKS["ib"]
    data_parallel = DataParallel(degree=config.dp, link=of(dp_link), zero=config.zero) if config.dp > 1 else None
    return Cluster(devices=devices, stages_per_device=stages_per_device, placement=placement,
                   memory_per_device=device.memory_gib, link=of(link),
                   microbatches=microbatches if microbatches is not None else 4 * devices, objective=objective,
                   data_parallel=data_parallel, memory_bandwidth=device.hbm_tbps * 1e12 / 1e3 / GIB, **topology)

"""A small decoder-only transformer as a list of layers in model order, to split into stages.

``transformer_layers`` returns ``[embedding, block × n, head]`` (pre-norm blocks: causal
self-attention and an MLP, each with a residual; the head is the final norm and the LM head). Any
contiguous split ``[(start, end), ...]`` becomes the executor's stage modules through
:func:`stage_modules`; :func:`lm_loss` (cross-entropy) ends the last stage. The same seed gives
the same weights in every process, so a single-process reference can be rebuilt anywhere.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812

from pipesched.solver import Schedule
from pipesched.solver.core.instance import Instance

from .machine_load import cpu_mark


@dataclass(frozen=True)
class TinyTransformer:
    """Shape of the runtime's test transformer (``seq`` tokens per sequence)."""

    vocab: int = 64
    hidden: int = 32
    heads: int = 4
    ffn: int = 64
    layers: int = 4
    seq: int = 8

    def __post_init__(self) -> None:
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")


class Embedding(nn.Module):
    """Token ids ``(b, s)`` to activations ``(b, s, h)``."""

    def __init__(self, vocab: int, hidden: int) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.tokens(ids)


class Block(nn.Module):
    """Pre-norm block: ``x + attn(norm(x))``, then ``x + mlp(norm(x))`` (causal attention)."""

    def __init__(self, hidden: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.heads = heads
        self.attn_norm = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.mlp_norm = nn.LayerNorm(hidden)
        self.up = nn.Linear(hidden, ffn)
        self.down = nn.Linear(ffn, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).split(h, dim=-1)
        q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, h))
        return x + self.down(F.gelu(self.up(self.mlp_norm(x))))


class Head(nn.Module):
    """Final norm and LM head: activations to logits ``(b, s, V)``."""

    def __init__(self, hidden: int, vocab: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.out = nn.Linear(hidden, vocab, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.norm(x))


def transformer_layers(config: TinyTransformer = TinyTransformer(), seed: int = 0,
                       dtype: torch.dtype = torch.float32) -> list[nn.Module]:
    """``[Embedding, Block × layers, Head]``, initialised from ``seed`` alone (the global RNG is untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layers: list[nn.Module] = [Embedding(config.vocab, config.hidden)]
        layers += [Block(config.hidden, config.heads, config.ffn) for _ in range(config.layers)]
        layers.append(Head(config.hidden, config.vocab))
    return [m.to(dtype) for m in layers]


def even_split(num_layers: int, num_stages: int) -> list[tuple[int, int]]:
    """Contiguous ``[start, end)`` ranges of near-equal layer counts (the first stages get the extra)."""
    if not 1 <= num_stages <= num_layers:
        raise ValueError(f"cannot split {num_layers} layers into {num_stages} non-empty stages")
    q, r = divmod(num_layers, num_stages)
    bounds = [0]
    for s in range(num_stages):
        bounds.append(bounds[-1] + q + (s < r))
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def stage_modules(layers: Sequence[nn.Module], split: Sequence[tuple[int, int]]) -> list[nn.Module]:
    """One ``nn.Sequential`` per stage; ``split`` must cover the layers contiguously, in order."""
    expected = 0
    for s, (start, end) in enumerate(split):
        if start != expected or end <= start:
            raise ValueError(f"split[{s}] = [{start}, {end}) does not continue at layer {expected} with at "
                             "least one layer: stages must be contiguous and non-empty")
        expected = end
    if expected != len(layers):
        raise ValueError(f"the split covers layers [0, {expected}) but the model has {len(layers)}")
    return [nn.Sequential(*layers[start:end]) for start, end in split]


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over every token of the microbatch."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def sample_tokens(batch: int, config: TinyTransformer = TinyTransformer(), seed: int = 1
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token ids ``(batch, seq)`` and their next-token targets."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(config.vocab, (batch, config.seq + 1), generator=g)
    return ids[:, :-1].contiguous(), ids[:, 1:].contiguous()


def reference_grads(config: TinyTransformer, tokens: torch.Tensor, targets: torch.Tensor,
                    seed: int = 0) -> dict[str, torch.Tensor]:
    """Full-batch gradients of the unsplit model, keyed ``"{layer}.{param name}"``."""
    layers = transformer_layers(config, seed)
    lm_loss(nn.Sequential(*layers)(tokens), targets).backward()
    return {f"{k}.{n}": p.grad.clone() for k, m in enumerate(layers) for n, p in m.named_parameters()}


def replay_rank(rank: int, world: int, jobs: Sequence[tuple], config: dict,
                batch: int, steps: int = 2, seed: int = 0) -> list[dict]:
    """On one rank of a gloo group, for each ``(schedule JSON, split[, recompute stages])``: ``steps``
    training steps of the schedule on this rank's stages, from fresh weights.

    Returns per job the last step's gradients keyed as :func:`reference_grads`, the fastest step's
    wall time ``step_s``, that step's busy (compute) time ``busy_s``, its compute in this thread's
    CPU time ``cpu_s`` (what a loaded machine does not inflate), its twin gradient sum ``twin_s`` (dual
    placement; 0 otherwise) and its ``timeline``: ``(kind, stage, microbatch, wait, start, end, cpu)``
    per op (times from the step's start), all in seconds; and ``steps``: every step's ``(t0, timeline)``,
    ``t0`` its start on the machine's monotonic clock, so all ranks' ops line up (who ran at once);
    ``marks``: CPU marks around the job's steps (:func:`~pipesched.runtime.machine_load.other_cores`).
    """
    from .replay.executor import PipelineExecutor

    cfg = TinyTransformer(**config)
    tokens, targets = sample_tokens(batch, cfg)
    out = []
    for schedule_json, split, *rest in jobs:
        schedule = Schedule.model_validate_json(schedule_json)
        stages = stage_modules(transformer_layers(cfg, seed), split)  # one per model stage
        p, dual = schedule.problem.devices, schedule.problem.placement == "dual"

        def model(s: int, p: int = p, dual: bool = dual) -> int:  # dual: the upward copy runs stage s - p
            return s - p if dual and s >= p else s

        mine = {s: stages[model(s)] for s in Instance.from_problem(schedule.problem).stages_of_device[rank]}
        recompute = [s for s in (rest[0] if rest else ()) if s in mine]
        ex = PipelineExecutor(schedule, mine, lm_loss, timeout_s=30, recompute=recompute)
        best: dict = {"step_s": float("inf")}
        every = []
        start = cpu_mark()
        for _ in range(steps):
            for m in mine.values():
                m.zero_grad(set_to_none=True)
            t0 = time.perf_counter()
            ex.step(tokens, targets)
            step_s = time.perf_counter() - t0
            timeline = [(o.kind, o.stage, o.microbatch, *t, ex.last_op_cpu_s[o]) for o, t in ex.last_timeline.items()]
            every.append((ex.last_step_t0, timeline))
            if step_s < best["step_s"]:
                best = {"step_s": step_s, "busy_s": ex.last_busy_s, "cpu_s": sum(ex.last_op_cpu_s.values()),
                        "twin_s": ex.last_twin_s, "timeline": timeline}
        best["steps"], best["marks"] = every, (start, cpu_mark())
        grads = {f"{split[model(s)][0] + k}.{name}": w.grad.clone()
                 for s, m in mine.items() for k, layer in enumerate(m) for name, w in layer.named_parameters()}
        out.append({"grads": grads, **best})
    return out


def config_dict(config: TinyTransformer) -> dict:
    """``config`` as plain data (what :func:`replay_rank` takes across processes)."""
    return asdict(config)

"""profile_layers measures each distinct layer once into a planning Model; profile_link fits a
latency and a bandwidth from a real gloo ping-pong."""

from __future__ import annotations

import pytest
import torch
from runtime_limits import GROUP_TIMEOUT_S
from torch import nn

from pipesched.runtime.launch import run_ranks
from pipesched.runtime.profiling.profile_layers import (
    GIB,
    LinkProfile,
    _fit,
    layer_kind,
    op_overhead,
    profile_dispatch,
    profile_layers,
    profile_link,
)
from pipesched.runtime.transformer import (
    Block,
    TinyTransformer,
    lm_loss,
    sample_tokens,
    transformer_layers,
)
from pipesched.solver.planning import Model

CONFIG = TinyTransformer(vocab=40, hidden=16, heads=2, ffn=32, layers=5, seq=6)


def _count_forwards(layers: list[nn.Module]) -> list[int]:
    counts = [0] * len(layers)
    for k, m in enumerate(layers):
        m.register_forward_hook(lambda *_, k=k: counts.__setitem__(k, counts[k] + 1))
    return counts


def test_identical_blocks_are_profiled_once_and_written_with_repeat() -> None:
    layers = transformer_layers(CONFIG)
    counts = _count_forwards(layers)
    tokens, targets = sample_tokens(2, CONFIG)
    model = profile_layers(layers, tokens, loss_fn=lm_loss, sample_target=targets, repeats=3, warmup=1)
    assert [(x.name, x.repeat) for x in model.layers] == [("embedding", 1), ("block", 5), ("head", 1)]
    # the first block is timed (1 warm-up + 3 runs); the other four only pass their output on
    assert counts[1] == 4 and counts[2:6] == [1, 1, 1, 1]
    assert counts[0] == 4 and counts[6] == 4
    assert Model.model_validate_json(model.model_dump_json()) == model


def test_costs_memory_static_and_output_are_measured() -> None:
    layers = transformer_layers(CONFIG)
    tokens, targets = sample_tokens(2, CONFIG)
    embed, block, head = profile_layers(layers, tokens, loss_fn=lm_loss, sample_target=targets,
                                        repeats=2, warmup=1).layers
    assert embed.backward_weight > 0  # its B only sets up W: token ids take no gradient
    assert embed.recompute is None and block.recompute is not None  # nothing to recompute from ids
    assert all(t > 0 for t in (block.forward, block.backward_input, block.backward_weight))
    params = sum(p.numel() for p in layers[1].parameters())
    assert block.static == pytest.approx(params * 4 * 4 / GIB)  # fp32 weight, grad, two Adam moments
    assert block.output == pytest.approx(2 * 6 * 16 * 4 / GIB)  # (b, s, h) float32 activation
    assert head.output == 0.0  # the loss is not sent anywhere
    for layer in (embed, block, head):
        mem = layer.memory
        assert mem.forward + mem.backward_input + mem.backward_weight == pytest.approx(0.0, abs=1e-15)
    assert block.memory.forward > 0
    assert block.recompute.memory.forward == pytest.approx(block.output)  # only the block's input is kept


def test_layer_kind_tells_shapes_apart_and_names_follow() -> None:
    small, wide = Block(16, 2, 32), Block(16, 2, 64)
    assert layer_kind(small) == layer_kind(Block(16, 2, 32)) != layer_kind(wide)
    # the first layer (no input gradient) and the last (with the loss) run differently: kinds of their own
    layers: list[nn.Module] = [nn.Linear(16, 16), small, Block(16, 2, 32), wide, Block(16, 2, 32), nn.Linear(16, 16)]
    model = profile_layers(layers, torch.randn(2, 6, 16), repeats=1, warmup=0)
    assert [(x.name, x.repeat) for x in model.layers] == [
        ("linear", 1), ("block", 2), ("block#2", 1), ("block", 1), ("linear#2", 1)]
    assert model.layers[1].forward == model.layers[3].forward  # one kind, one measurement
    model = profile_layers(layers[1:4], torch.randn(2, 6, 16), names=["a", "b", "c"], repeats=1, warmup=0)
    assert [(x.name, x.repeat) for x in model.layers] == [("a", 1), ("b", 1), ("c", 1)]


def test_op_overhead_is_taken_out_of_every_op_floored_at_zero() -> None:
    layers = transformer_layers(CONFIG)
    tokens = sample_tokens(2, CONFIG)[0]
    fixed = op_overhead(repeats=3, warmup=1)
    assert all(t > 0 for t in fixed)
    model = profile_layers(layers, tokens, repeats=1, warmup=0, op_overhead=(1e6, 1e6, 1e6))
    assert all(x.forward == x.backward_input == x.backward_weight == 0.0 for x in model.layers)


def test_bad_arguments_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="layers is empty"):
        profile_layers([], torch.zeros(1))
    with pytest.raises(ValueError, match="names has 1 entries for 2 layers"):
        profile_layers([nn.Linear(2, 2), nn.Linear(2, 2)], torch.zeros(1, 2), names=["x"])
    with pytest.raises(ValueError, match="loss_fn needs sample_target"):
        profile_layers([nn.Linear(2, 2)], torch.zeros(1, 2), loss_fn=nn.functional.mse_loss)


def test_fit_recovers_a_line() -> None:
    # one-way time = 0.05 ms + bytes / (2 GiB/ms)
    samples = [(n, 0.05 + n / GIB / 2.0) for n in (4, 2**16, 2**20, 2**24)]
    fit = _fit(samples)
    assert fit.latency_ms == pytest.approx(0.05) and fit.gib_per_ms == pytest.approx(2.0)
    assert _fit([(4, 0.1), (2**20, 0.1)]).gib_per_ms is None  # no size cost measured
    assert fit.link().latency == pytest.approx(0.05)


def _link_rank(rank: int, world: int) -> LinkProfile:
    return profile_link(sizes=(4, 2**14, 2**18), repeats=5, warmup=1)


def test_profile_link_on_gloo_gives_every_rank_the_same_fit() -> None:
    results = run_ranks(_link_rank, 3, timeout_s=GROUP_TIMEOUT_S)  # rank 2 only receives the fit
    fits = [r.value for r in results]
    assert fits[0] == fits[1] == fits[2]
    assert fits[0].latency_ms >= 0 and len(fits[0].samples) == 3
    assert [s for s, _ in fits[0].samples] == [4, 2**14, 2**18]
    assert all(t > 0 for _, t in fits[0].samples)


def _dispatch_rank(rank: int, world: int) -> float:
    return profile_dispatch(latency_ms=0.01, microbatches=4, steps=3)


def test_profile_dispatch_gives_every_rank_the_same_fixed_cost() -> None:
    values = [r.value for r in run_ranks(_dispatch_rank, 2, timeout_s=GROUP_TIMEOUT_S)]
    assert values[0] == values[1]  # computed from all-reduced figures: one answer for the group
    assert 0.0 <= values[0] < 1e4


def test_cpu_time_profiles_the_same_layers_and_memory_and_is_cpu_only() -> None:
    layers = transformer_layers(CONFIG)
    x, y = sample_tokens(2, CONFIG)
    wall = profile_layers(layers, x, loss_fn=lm_loss, sample_target=y, repeats=2, warmup=1)
    cpu = profile_layers(layers, x, loss_fn=lm_loss, sample_target=y, repeats=2, warmup=1, cpu_time=True)
    assert [(a.name, a.repeat) for a in cpu.layers] == [(a.name, a.repeat) for a in wall.layers]
    assert [a.memory for a in cpu.layers] == [a.memory for a in wall.layers]  # the clock changes times only
    assert all(t >= 0 and t == t for a in cpu.layers for t in (a.forward, a.backward_input, a.backward_weight))
    assert cpu.layers[1].forward > 0  # a block's forward does work
    with pytest.raises(ValueError, match="only applies to a model on the CPU"):
        profile_layers(layers, torch.zeros(2, 6, dtype=torch.long, device="meta"), cpu_time=True)

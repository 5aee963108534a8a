"""The runtime's small transformer: any contiguous layer split replays on gloo ranks with the
full-batch gradients of the unsplit model (uneven splits, split backward, a V placement)."""

from __future__ import annotations

import pytest
import torch
from runtime_limits import GROUP_TIMEOUT_S

from pipesched.runtime.launch import run_ranks
from pipesched.runtime.transformer import (
    TinyTransformer,
    config_dict,
    even_split,
    lm_loss,
    reference_grads,
    replay_rank,
    sample_tokens,
    stage_modules,
    transformer_layers,
)
from pipesched.solver import Problem, solve

CONFIG = TinyTransformer(vocab=48, hidden=16, heads=2, ffn=32, layers=4, seq=6)  # 6 layers in all
BATCH = 9  # microbatches of 3, 2, 2, 2: the loss scaling must use each microbatch's share
TOLERANCE = 1e-5

# (method, stages_per_device, placement, split of the 6 layers)
CASES = [
    ("1f1b", 1, "loop", [(0, 4), (4, 6)]),  # uneven: embedding + 3 blocks | block + head
    ("zb-h1", 1, "loop", [(0, 2), (2, 6)]),
    ("gpipe", 1, "loop", [(0, 3), (3, 6)]),
    ("zb-v", 2, "v", [(0, 2), (2, 3), (3, 4), (4, 6)]),  # stages 0, 3 on rank 0; 1, 2 on rank 1
]


@pytest.fixture(scope="module")
def replayed() -> list[list[dict]]:
    jobs = []
    for method, v, placement, split in CASES:
        problem = Problem(devices=2, microbatches=4, stages_per_device=v, placement=placement)
        jobs.append((solve(problem, method).model_dump_json(), split))
    results = run_ranks(replay_rank, 2, jobs, config_dict(CONFIG), BATCH, 2, timeout_s=GROUP_TIMEOUT_S)
    return [r.value for r in results]


@pytest.mark.parametrize("case", range(len(CASES)), ids=[c[0] for c in CASES])
def test_a_split_transformer_gives_the_full_batch_gradients(replayed: list[list[dict]], case: int) -> None:
    tokens, targets = sample_tokens(BATCH, CONFIG)
    ref = reference_grads(CONFIG, tokens, targets)
    got = {k: g for rank in replayed for k, g in rank[case]["grads"].items()}
    assert set(got) == set(ref)
    diff = max(float((got[k] - ref[k]).abs().max()) for k in ref)
    assert diff <= TOLERANCE, f"{CASES[case][0]}: max grad diff {diff:g}"
    assert all(rank[case]["step_s"] > 0 for rank in replayed)


def test_same_seed_same_weights_and_the_layers_chain_to_a_loss() -> None:
    a, b = transformer_layers(CONFIG, seed=3), transformer_layers(CONFIG, seed=3)
    assert [type(m).__name__ for m in a] == ["Embedding", "Block", "Block", "Block", "Block", "Head"]
    for ma, mb in zip(a, b, strict=True):
        for pa, pb in zip(ma.parameters(), mb.parameters(), strict=True):
            assert torch.equal(pa, pb)
    other = transformer_layers(CONFIG, seed=4)
    assert not torch.equal(a[1].qkv.weight, other[1].qkv.weight)
    tokens, targets = sample_tokens(2, CONFIG)
    whole = lm_loss(torch.nn.Sequential(*a)(tokens), targets)
    split = lm_loss(torch.nn.Sequential(*stage_modules(b, [(0, 1), (1, 5), (5, 6)]))(tokens), targets)
    assert torch.equal(whole, split) and whole.item() > 0


def test_even_split_and_bad_splits() -> None:
    assert even_split(6, 4) == [(0, 2), (2, 4), (4, 5), (5, 6)]
    layers = transformer_layers(CONFIG)
    with pytest.raises(ValueError, match=r"split\[1\] = \[3, 6\) does not continue at layer 2"):
        stage_modules(layers, [(0, 2), (3, 6)])
    with pytest.raises(ValueError, match=r"covers layers \[0, 5\) but the model has 6"):
        stage_modules(layers, [(0, 5)])
    with pytest.raises(ValueError, match="cannot split 3 layers into 4"):
        even_split(3, 4)


def test_four_ranks_with_a_v_placement_give_the_full_batch_gradients() -> None:
    config = TinyTransformer(vocab=48, hidden=16, heads=2, ffn=32, layers=6, seq=6)  # 8 layers, one per stage
    schedule = solve(Problem(devices=4, microbatches=4, stages_per_device=2, placement="v"), "zb-v")
    split = even_split(8, 8)
    results = run_ranks(replay_rank, 4, [(schedule.model_dump_json(), split)], config_dict(config), BATCH, 1,
                        timeout_s=GROUP_TIMEOUT_S)
    tokens, targets = sample_tokens(BATCH, config)
    ref = reference_grads(config, tokens, targets)
    got = {k: g for r in results for k, g in r.value[0]["grads"].items()}
    assert set(got) == set(ref)
    assert max(float((got[k] - ref[k]).abs().max()) for k in ref) <= TOLERANCE

"""Megatron layout strings round-trip to the same split; torchtitan module names follow the pattern."""

from __future__ import annotations

import itertools

import pytest
from planning_models import small_model

from pipesched.solver.planning.exports import (
    ModuleNames,
    bounds_from_layout,
    megatron_layout,
    parse_megatron_layout,
    torchtitan_fqns,
)


def test_layout_string_of_a_split_reads_like_megatrons() -> None:
    layers = small_model(8).expanded()  # embed, 8 blocks, head
    assert megatron_layout(layers, [0, 3, 6, 9, 10]) == "Et*2|t*3|t*3|L"
    assert megatron_layout(layers, [0, 1, 5, 10]) == "E|t*4|t*4L"


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_every_split_parses_back_to_itself(stages: int) -> None:
    layers = small_model(5).expanded()
    for cuts in itertools.combinations(range(1, len(layers)), stages - 1):
        bounds = [0, *cuts, len(layers)]
        assert bounds_from_layout(megatron_layout(layers, bounds), layers) == bounds


def test_parser_expands_groups_and_ignores_commas() -> None:
    assert parse_megatron_layout("Et*3|(tt|)*2,m|L") == ["Ettt", "tt", "tt", "m", "L"]
    with pytest.raises(ValueError, match=r"unexpected '\+'"):
        parse_megatron_layout("Et+t|L")
    with pytest.raises(ValueError, match="has 9 layers"):
        bounds_from_layout("Et*3|t*4L", small_model(8).expanded())


def test_torchtitan_names_count_blocks_from_zero() -> None:
    layers = small_model(4).expanded()
    assert torchtitan_fqns(layers, [0, 2, 4, 6]) == [
        ["tok_embeddings", "layers.0"], ["layers.1", "layers.2"], ["layers.3", "norm", "lm_head"]]
    names = ModuleNames(input=["model.embed_tokens"], block="model.layers.{i}", output=["lm_head"])
    assert torchtitan_fqns(layers, [0, 5, 6], names)[1] == ["lm_head"]

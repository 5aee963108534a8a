"""The cache key: equivalent problems share it, different problems do not."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from pipesched.solver.core.canonical import canonical_json, problem_key
from pipesched.solver.core.problem import Problem

BASE = {"devices": 4, "microbatches": 8}


def test_scalars_and_equal_per_stage_lists_share_a_key() -> None:
    listed = {**BASE, "costs": {"forward": [1, 1, 1, 1], "backward_input": [1.0] * 4},
              "memory": {"forward": [1.0] * 4, "limit": [5, 5, 5, 5]}}
    scalar = {**BASE, "costs": {"forward": 1.0, "backward_input": 1}, "memory": {"forward": 1, "limit": 5.0}}
    assert problem_key(listed) == problem_key(scalar)


def test_key_order_omitted_defaults_and_number_spelling_do_not_matter() -> None:
    a = json.loads('{"devices": 4, "microbatches": 8, "costs": {"forward": 1e0, "comm": -0.0}}')
    b = json.loads('{"costs": {"comm": 0, "forward": 1.0, "backward_weight": 1}, "placement": "loop", '
                   '"microbatches": 8, "devices": 4, "objective": "makespan"}')
    assert problem_key(a) == problem_key(b)


def test_fused_backward_only_sees_the_sums() -> None:
    a = {**BASE, "split_backward": False, "costs": {"backward_input": 2.0, "backward_weight": 1.0},
         "memory": {"backward_input": 0.0, "backward_weight": -1.0}}
    b = {**BASE, "split_backward": False, "costs": {"backward_input": 1.0, "backward_weight": 2.0},
         "memory": {"backward_input": -1.0, "backward_weight": 0.0}}
    assert problem_key(a) == problem_key(b)
    split_a, split_b = ({**p, "split_backward": True} for p in (a, b))
    assert problem_key(split_a) != problem_key(split_b)


def test_different_problems_get_different_keys() -> None:
    variants = [
        BASE, {**BASE, "microbatches": 9}, {**BASE, "objective": "stage_span"},
        {**BASE, "costs": {"forward": [1.0, 1.0, 1.0, 1.5]}}, {**BASE, "costs": {"comm": 0.1}},
        {**BASE, "memory": {"limit": 4}}, {**BASE, "memory": {"limit": [4, 4, 4, 5]}},
        {**BASE, "costs": {"forward": 1.0000000000000002}},
    ]
    keys = {problem_key(v) for v in variants}
    assert len(keys) == len(variants)


def test_key_is_a_sha256_hex_digest_and_the_model_and_dict_agree() -> None:
    key = problem_key(BASE)
    assert len(key) == 64 and int(key, 16) >= 0
    assert problem_key(Problem.model_validate(BASE)) == key


@settings(max_examples=60, deadline=None)
@given(
    p=st.integers(1, 4), v=st.integers(1, 2), m=st.integers(1, 6),
    costs=st.lists(st.sampled_from([0.5, 1.0, 2.0, 3.25]), min_size=3, max_size=3),
)
def test_expanding_every_scalar_to_a_per_stage_list_keeps_the_key(p: int, v: int, m: int, costs: list[float]) -> None:
    stages = p * v
    scalar = {"devices": p, "microbatches": m, "stages_per_device": v,
              "costs": dict(zip(("forward", "backward_input", "backward_weight"), costs, strict=True))}
    listed = {**scalar, "costs": {k: [x] * stages for k, x in scalar["costs"].items()},
              "memory": {"forward": [1.0] * stages, "backward_input": [0.0] * stages,
                         "backward_weight": [-1.0] * stages, "limit": None}}
    assert canonical_json(Problem.model_validate(scalar)) == canonical_json(Problem.model_validate(listed))
    assert problem_key(scalar) == problem_key(listed)

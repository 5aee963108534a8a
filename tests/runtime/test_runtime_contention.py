"""The contention factor: one calibration figure per group, every rank agreeing, never below 1."""

from __future__ import annotations

import math

from runtime_limits import GROUP_TIMEOUT_S

from pipesched.runtime.launch import run_ranks


def _contention_rank(rank: int, world: int) -> float:
    from pipesched.runtime.contention import contention_factor

    return contention_factor(size=64, repeats=3, warmup=1)


def test_every_rank_gets_the_same_factor_of_at_least_one() -> None:
    values = [r.value for r in run_ranks(_contention_rank, 3, timeout_s=GROUP_TIMEOUT_S)]
    assert values[0] == values[1] == values[2]  # all-reduced: one answer for the group
    assert math.isfinite(values[0]) and values[0] >= 1.0

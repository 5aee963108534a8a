"""The contention factor and the slowdown curve: one calibration per group, every rank agreeing, never
below 1."""

from __future__ import annotations

import math

from runtime_limits import GROUP_TIMEOUT_S

from pipesched.runtime.launch import run_ranks


def _contention_rank(rank: int, world: int) -> float:
    from pipesched.runtime.profiling.contention import contention_factor

    return contention_factor(size=64, repeats=3, warmup=1)


def test_every_rank_gets_the_same_factor_of_at_least_one() -> None:
    values = [r.value for r in run_ranks(_contention_rank, 3, timeout_s=GROUP_TIMEOUT_S)]
    assert values[0] == values[1] == values[2]  # all-reduced: one answer for the group
    assert math.isfinite(values[0]) and values[0] >= 1.0


def _curve_rank(rank: int, world: int) -> list[float]:
    import torch

    from pipesched.runtime.profiling.contention import slowdown_curve

    a = torch.randn(48, 48, generator=torch.Generator().manual_seed(rank))
    return slowdown_curve(lambda: a @ a, repeats=2, warmup=1, rounds=1, block_ms=5.0)


def test_every_rank_gets_the_same_curve_one_entry_per_count_of_busy_ranks() -> None:
    values = [r.value for r in run_ranks(_curve_rank, 3, timeout_s=GROUP_TIMEOUT_S)]
    assert values[0] == values[1] == values[2]  # all-reduced: one answer for the group
    assert len(values[0]) == 3 and values[0][0] == 1.0
    assert all(math.isfinite(x) and x >= 1.0 for x in values[0])


def _handoff_rank(rank: int, world: int) -> list[float]:
    import torch

    from pipesched.runtime.profiling.contention import handoff_curve

    a = torch.randn(48, 48, generator=torch.Generator().manual_seed(rank))
    return handoff_curve(lambda: a @ a, window_s=0.05, rounds=1)


def test_every_rank_gets_the_same_hand_off_curve_zero_without_other_ranks_busy() -> None:
    values = [r.value for r in run_ranks(_handoff_rank, 3, timeout_s=GROUP_TIMEOUT_S)]
    assert values[0] == values[1] == values[2]  # broadcast: one answer for the group
    assert len(values[0]) == 2 and values[0][0] == 0.0  # j = 0, 1 other ranks computing
    assert all(math.isfinite(x) and x >= 0.0 for x in values[0])


def _one_core_curve_rank(rank: int, world: int) -> list[float]:
    import torch

    from pipesched.runtime.profiling.contention import slowdown_curve

    a = torch.randn(48, 48, generator=torch.Generator().manual_seed(rank))
    return slowdown_curve(lambda: a @ a, repeats=2, warmup=1, rounds=1, block_ms=5.0, cores=1)


def test_the_curve_is_never_below_what_the_cores_allow() -> None:
    """On one core, k ranks at once take at least k times as long, whatever the timing read."""
    values = [r.value for r in run_ranks(_one_core_curve_rank, 3, timeout_s=GROUP_TIMEOUT_S)]
    assert values[0] == values[1] == values[2]
    assert all(x >= k for k, x in enumerate(values[0], 1))

"""The fidelity benchmark's timeline reading: slowdown per count of ranks computing at once and the
hand-off between ranks, on hand-made timelines whose answers are known."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pipesched.solver import Problem

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from fidelity_timeline import timeline_lines  # noqa: E402

#: Two stages of 10 ms forward each alone (backward ops left out of the timelines).
PROBLEM = Problem.model_validate({"devices": 2, "microbatches": 2,
                                  "costs": {"forward": [10.0, 10.0], "backward_input": [10.0, 10.0],
                                            "backward_weight": [10.0, 10.0]}})


def rank(t0: float, ops: list[tuple[str, int, int, float, float, float]]) -> dict:
    """A replay_rank-shaped result: one step starting at ``t0`` (s) with ``(kind, stage, mb, wait, start,
    end)`` ops in seconds from ``t0``."""
    return {"steps": [(t0, [(*op, 0.0) for op in ops])]}


def test_slowdown_by_busy_ranks_and_the_hand_off() -> None:
    # rank 0: F0 mb0 alone (10 ms), then F0 mb1 beside rank 1's F1 mb0, both slowed to 20 ms;
    # rank 1 waited for F0 mb0 from the start and began 2 ms after it ended; its F1 mb1 runs alone.
    r0 = rank(100.0, [("F", 0, 0, 0.0, 0.0, 0.010), ("F", 0, 1, 0.010, 0.012, 0.032)])
    r1 = rank(100.0, [("F", 1, 0, 0.0, 0.012, 0.032), ("F", 1, 1, 0.032, 0.034, 0.044)])
    slow, hand = timeline_lines(2, [1.0, 1.5], [(PROBLEM, [r0, r1])])
    assert "k = 1: × 1.00 (2 ops; curve × 1.00)" in slow
    assert "k = 2: × 2.00 (2 ops; curve × 1.50)" in slow
    assert "too few waits" in hand  # two waits: F1 mb0 on F0 mb0 (2 ms), F1 mb1 on F0 mb1 (2 ms)


def test_the_hand_off_median_counts_only_waits_for_another_ranks_output() -> None:
    ops0, ops1 = [], []
    for mb in range(12):  # rank 1's F of each microbatch starts 1 ms (mb even) or 3 ms after rank 0's ends
        t = 0.050 * mb
        ops0.append(("F", 0, mb, t, t, t + 0.010))
        start = t + 0.010 + (0.001 if mb % 2 == 0 else 0.003)
        ops1.append(("F", 1, mb, t, start, start + 0.010))
    problem = PROBLEM.model_copy(update={"microbatches": 12})
    _slow, hand = timeline_lines(2, [1.0, 1.0], [(problem, [rank(5.0, ops0), rank(5.0, ops1)])])
    assert "over 12 waits" in hand
    median = float(hand.split("median ")[1].split(" ms")[0])
    assert median == pytest.approx(2.0)  # 1 and 3 ms, six each

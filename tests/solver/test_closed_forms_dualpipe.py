"""The bubble and activation closed forms of the DualPipe table (DeepSeek-V3 report, Table 2), against
our recipes' schedules, in the regime the authors state them: uniform chunks, comm 0.

Their notation, mapped to ours: F a forward chunk (our ``f``), B a *full* backward chunk (our
``b + w``), W its weight part (our ``w``). The bubble is the idle time of one device inside the
pipeline's window: ``stage_span - m (f + b + w)`` under the ``stage_span`` objective (the largest
per-device last end minus first start: device 0's span, the span the papers draw). Settings: the
bubbles need ``m >= p`` (a full steady phase); 1F1B with a fused backward (one op B + W, as the
table's 1F1B has no separate W); ZB1P is our ``zb-h1`` with a split backward under the memory cap
``p`` on every device (the zero-bubble paper's 1p budget: 1F1B's peak, which its first device
reaches; ``"1x1f1b"`` is tighter, per device, and ZB-H1 holds more than 1F1B on later devices). Activations count in
microbatches: each F holds one unit until its W (or fused B) releases it.
"""

from __future__ import annotations

import pytest

from pipesched.solver import Problem, solve, validate

CASES = [(p, m) for p in (2, 3, 4, 6) for m in (p, 2 * p, 3 * p + 1)]
COSTS = [(1.0, 1.0, 1.0), (1.0, 2.0, 0.5), (2.0, 3.0, 1.0)]


def uniform(p: int, m: int, f: float, b: float, w: float, split: bool, limit: float | None = None) -> Problem:
    return Problem(
        devices=p,
        microbatches=m,
        split_backward=split,
        objective="stage_span",
        costs={"forward": f, "backward_input": b, "backward_weight": w, "comm": 0.0},
        memory={"forward": 1.0, "backward_input": 0.0, "backward_weight": -1.0, "limit": limit},
    )


def bubble(problem: Problem, method: str) -> tuple[float, list[float]]:
    """Device 0's idle time inside the stage span, and the per-device activation peaks."""
    schedule = solve(problem, method)
    assert validate(schedule) == []
    c = problem.costs
    return schedule.objective_value - problem.microbatches * (c.forward + c.backward_input + c.backward_weight), list(
        schedule.peak_memory
    )


@pytest.mark.parametrize(("f", "b", "w"), COSTS)
@pytest.mark.parametrize(("p", "m"), CASES)
def test_1f1b_bubble_is_p_minus_one_times_f_plus_full_b(p: int, m: int, f: float, b: float, w: float) -> None:
    idle, peaks = bubble(uniform(p, m, f, b, w, split=False), "1f1b")
    assert idle == pytest.approx((p - 1) * (f + (b + w)))  # (PP - 1)(F + B)
    assert max(peaks) == p  # PP microbatches' activations on the first device


@pytest.mark.parametrize(("f", "b", "w"), COSTS)
@pytest.mark.parametrize(("p", "m"), CASES)
def test_zb1p_bubble_is_p_minus_one_times_f_plus_full_b_minus_two_w(p: int, m: int, f: float, b: float, w: float) -> None:
    idle, peaks = bubble(uniform(p, m, f, b, w, split=True, limit=float(p)), "zb-h1")
    assert idle == pytest.approx((p - 1) * (f + (b + w) - 2 * w))  # (PP - 1)(F + B - 2W)
    assert max(peaks) == p  # the same PP as 1F1B: the cap is 1F1B's peak and it is reached


@pytest.mark.parametrize(("p", "m"), CASES)
def test_zb1p_bubble_is_below_1f1b_by_two_w_per_hop(p: int, m: int) -> None:
    # The point of the table: splitting W out saves 2W per hop at equal activation memory.
    f, b, w = 1.0, 2.0, 0.5
    one, _ = bubble(uniform(p, m, f, b, w, split=False), "1f1b")
    zb, _ = bubble(uniform(p, m, f, b, w, split=True, limit=float(p)), "zb-h1")
    assert one - zb == pytest.approx(2 * w * (p - 1))

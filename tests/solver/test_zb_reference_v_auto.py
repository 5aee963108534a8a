"""The rewritten V auto-schedule of the zero-bubble authors (``benchmarks/zb_references/v_auto.py``), a
reference ``auto`` is compared against: valid orders within the cap, a clean refusal when the cap
leaves it nothing, and on unit costs the zero bubble its building blocks give at 1F1B's memory."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from pipesched.solver import Instance, Problem
from pipesched.solver.core.metrics import peak_memory
from pipesched.solver.core.tolerance import within_cap
from pipesched.solver.timing.finalize import from_order
from pipesched.solver.timing.validate import validate

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from zb_references import NAMES, references  # noqa: E402
from zb_references import v_auto as va  # noqa: E402

#: One chunk's activations: F stores 3, B frees 1, W the other 2 (the paper's shape, B and W free memory).
MEMORY = {"forward": 3, "backward_input": -1, "backward_weight": -2}


def _paper_like(seed: int, p: int, m: int, cap_factor: float) -> Problem:
    """V placement, paper-like costs with per-stage jitter and comm; the cap in microbatch activations
    of the whole device (``cap_factor * p`` of them, 1p .. 2p as in the benchmark sets)."""
    rng = random.Random(seed)

    def costs(x: float) -> list[float]:
        return [round(x * rng.uniform(0.9, 1.1), 3) for _ in range(2 * p)]

    return Problem(devices=p, microbatches=m, stages_per_device=2, placement="v",
                   costs={"forward": costs(1.0), "backward_input": costs(1.0), "backward_weight": costs(0.6),
                          "comm": 0.05},
                   memory={**MEMORY, "limit": round(cap_factor * p * 2 * 3, 1)})


def _unit(p: int, m: int, cap_chunks: float, objective: str = "stage_span") -> Problem:
    """F = B = W = 1, no comm, memory counted as the authors count it (F +1, W -1)."""
    return Problem(devices=p, microbatches=m, stages_per_device=2, placement="v", objective=objective,
                   costs={"forward": 1, "backward_input": 1, "backward_weight": 1},
                   memory={"forward": 1, "backward_input": 0, "backward_weight": -1, "limit": cap_chunks})


@pytest.mark.parametrize(("p", "m", "cap"), [(4, 8, 1.0), (4, 8, 2.0), (4, 12, 1.5), (8, 16, 1.0),
                                             (8, 16, 2.0), (8, 24, 1.3)])
def test_orders_are_valid_and_within_the_cap(p: int, m: int, cap: float) -> None:
    problem = _paper_like(p * 100 + m, p, m, cap)
    pick, best = va.v_auto_pick(problem), va.v_auto(problem)
    assert pick is not None and best is not None
    for order in (pick, best.incumbent.order):
        schedule = from_order(problem, "v-auto", order)
        assert validate(schedule) == []
        assert all(within_cap(peak, float(problem.memory.limit)) for peak in schedule.peak_memory)  # type: ignore[arg-type]
    assert best.objective <= from_order(problem, "v-auto", pick).objective_value + 1e-9


def test_a_cap_below_1f1b_memory_is_kept_or_refused() -> None:
    """Half of 1F1B's activations (p chunks): every order it builds keeps to them; below one chunk it
    builds nothing and the reference is absent rather than over the cap."""
    problem = _unit(4, 8, 4)
    inst = Instance.from_problem(problem)
    orders = va.v_auto_orders(problem)
    assert orders
    assert all(max(peak_memory(inst, order)) <= 4 for order in orders)
    tiny = _unit(4, 8, 0.5)
    assert va.v_auto_orders(tiny) == [] and va.v_auto(tiny) is None and va.v_auto_pick(tiny) is None


@pytest.mark.parametrize(("p", "m"), [(3, 6), (4, 8), (4, 12)])
def test_unit_costs_at_1f1b_memory_leave_no_bubble(p: int, m: int) -> None:
    """At 2p chunk activations (1F1B's memory) the V building blocks are bubble-free: the authors' bubble
    estimate 3p - 1 - 3M + max(3p, p - 1 + 2 (1 + ceil(M / 2))) is 0 at M = 2p, and every device
    runs 6m unit passes, so the least stage span is 6m; device i cannot start before the F chain
    reaches it (time i), so the makespan is then 6m + p - 1. Derived, not read from the code's output."""
    span = va.v_auto(_unit(p, m, 2 * p))
    assert span is not None and span.objective == 6 * m
    pick = va.v_auto_pick(_unit(p, m, 2 * p))
    assert pick is not None
    assert from_order(_unit(p, m, 2 * p), "v-auto", pick).objective_value == 6 * m
    end = va.v_auto(_unit(p, m, 2 * p, "makespan"))
    assert end is not None and end.objective == 6 * m + p - 1


def test_registered_as_a_reference_for_v_only() -> None:
    assert va.NAME in NAMES
    v_problem = _unit(3, 6, 6)
    assert va.NAME in {t.name for t in references(v_problem)}
    loop = Problem(devices=3, microbatches=6, costs={"forward": 1, "backward_input": 1, "backward_weight": 1})
    assert va.v_auto(loop) is None

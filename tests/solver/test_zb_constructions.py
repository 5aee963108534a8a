"""The zero-bubble authors' constructions as candidates (``zb-auto``: the automatic ZB-1p / ZB-2p
heuristic; ``zb-v-generator``: their memory-aware ZB-V generator): valid schedules within the cap,
the paper's closed forms on unit costs, its published bubble rate, and ``auto`` runs them."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from pipesched.solver import Instance, Problem, solve
from pipesched.solver.core.metrics import bubble_ratio
from pipesched.solver.core.tolerance import within_cap
from pipesched.solver.heuristics.catalog import applicable
from pipesched.solver.heuristics.zb_auto import VARIANTS, ZBVariant, median_view, zb_auto_order
from pipesched.solver.heuristics.zb_phase import ZBConstructionsPhase
from pipesched.solver.heuristics.zbv_greedy import zbv_orders
from pipesched.solver.portfolio.candidates import COVERED, HEURISTIC_PHASES
from pipesched.solver.timing.validate import validate

UNIT = {"forward": 1, "backward_input": 1, "backward_weight": 1}
UNIT_MEMORY = {"forward": 1, "backward_input": 0, "backward_weight": -1}


def _unit(p: int, m: int, cap: float, placement: str = "loop") -> Problem:
    v = 2 if placement == "v" else 1
    return Problem(devices=p, microbatches=m, stages_per_device=v, placement=placement, objective="stage_span",
                   costs=UNIT, memory={**UNIT_MEMORY, "limit": cap})


def _jittered(seed: int, placement: str) -> Problem:
    """Paper-like costs with per-stage jitter, comm, and a cap between 1p and 2p."""
    rng = random.Random(seed)
    p, v = rng.choice((3, 4, 5)), (2 if placement == "v" else 1)
    m = rng.choice((2 * p, 3 * p))
    stages = p * v

    def costs(x: float) -> list[float]:
        return [round(x * rng.uniform(0.8, 1.2), 3) for _ in range(stages)]

    cap = round(rng.uniform(1.0, 2.0) * p * v * 3, 1)
    return Problem(devices=p, microbatches=m, stages_per_device=v, placement=placement,
                   costs={"forward": costs(1.0), "backward_input": costs(1.1), "backward_weight": costs(0.7),
                          "comm": 0.05},
                   memory={"forward": 3, "backward_input": -1, "backward_weight": -2, "limit": cap})


@pytest.mark.parametrize(("method", "placement"), [("zb-auto", "loop"), ("zb-v-generator", "v")])
@pytest.mark.parametrize("seed", range(4))
def test_the_constructions_give_valid_schedules_within_the_cap(method: str, placement: str, seed: int) -> None:
    problem = _jittered(seed, placement)
    schedule = solve(problem, method)  # finalize validates; checked again here
    assert validate(schedule) == []
    assert all(within_cap(peak, float(problem.memory.limit)) for peak in schedule.peak_memory)  # type: ignore[arg-type]


def test_every_variant_and_every_rerun_orders_every_op_once() -> None:
    problem = _jittered(7, "loop")
    inst = Instance.from_problem(problem)
    for variant in VARIANTS:
        order = zb_auto_order(inst, variant)
        assert sorted(op for ops in order for op in ops) == sorted(inst.ops())
    v_inst = Instance.from_problem(_jittered(7, "v"))
    orders = zbv_orders(v_inst)
    assert orders
    for order in orders:
        assert sorted(op for ops in order for op in ops) == sorted(v_inst.ops())


@pytest.mark.parametrize(("p", "m"), [(2, 4), (3, 6), (4, 8), (4, 12)])
def test_zb_auto_meets_the_papers_closed_forms_on_unit_costs(p: int, m: int) -> None:
    """F = B = W = 1, no comm: with p activations ZB-H1's 3m + p - 1 (optimal at that cap), with 2p none
    idle at all (3m, the zero-bubble schedule)."""
    assert solve(_unit(p, m, p), "zb-auto").objective_value == 3 * m + p - 1
    assert solve(_unit(p, m, 2 * p), "zb-auto").objective_value == 3 * m


@pytest.mark.parametrize(("p", "m"), [(2, 4), (3, 6), (4, 8)])
def test_zb_v_generator_has_no_bubble_on_unit_costs(p: int, m: int) -> None:
    """V placement, F = B = W = 1 per stage, 1F1B's memory (2p chunk activations): 6m, no idle time."""
    assert solve(_unit(p, m, 2 * p, "v"), "zb-v-generator").objective_value == 6 * m


def test_zb_auto_reproduces_the_papers_zb_1p_bubble() -> None:
    """The zero-bubble paper's Table 5: 14.6B model (h 5120, a 40), p 16, m 48, ZB-1p bubble 0.1397."""
    mb, mw = 34 * 5120 + 5 * 40 * 1024, 32 * 5120
    problem = Problem(devices=16, microbatches=48, objective="stage_span",
                      costs={"forward": 11.347, "backward_input": 11.248, "backward_weight": 8.132, "comm": 0.377},
                      memory={"forward": mb, "backward_input": mw - mb, "backward_weight": -mw, "limit": 16 * mb})
    schedule = solve(problem, "zb-auto")
    assert schedule.objective_value is not None
    assert round(bubble_ratio(Instance.from_problem(problem), schedule.objective_value), 4) == 0.1397


def test_a_variant_that_cannot_free_memory_is_skipped_not_broken() -> None:
    """A cap below one F leaves no variant an order: the method refuses instead of breaking the cap."""
    problem = _unit(3, 6, 0.5)
    with pytest.raises(ValueError, match="zb-auto"):
        zb_auto_order(Instance.from_problem(problem), ZBVariant(True, True, True))


def test_auto_runs_both_constructions_where_they_apply() -> None:
    """A phase of auto's heuristics of its own (the recipes phase, which skips them, could not afford
    them on large problems); the methods apply exactly where the constructions do."""
    assert any(isinstance(ph, ZBConstructionsPhase) for ph in HEURISTIC_PHASES)
    assert {"zb-auto", "zb-v-generator"} <= set(COVERED)
    assert "zb-auto" in {m.name for m in applicable(_unit(4, 8, 4))}
    assert "zb-v-generator" in {m.name for m in applicable(_unit(4, 8, 8, "v"))}
    interleaved = Problem(devices=4, microbatches=8, stages_per_device=2, memory={"limit": 8})
    assert not {"zb-auto", "zb-v-generator"} & {m.name for m in applicable(interleaved)}


def test_the_solver_builds_the_same_orders_as_the_independent_references() -> None:
    """``benchmarks/zb_references`` rewrites the same two algorithms on the public Problem alone; on
    per-stage costs both must build the same orders (the references reproduce the paper's rates)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from zb_references import zb_auto, zbv

    loop, vee = _jittered(11, "loop"), _jittered(11, "v")
    theirs = zb_auto.zb_auto_orders(loop)
    ours = [zb_auto_order(view, variant) for view in (Instance.from_problem(loop), median_view(
        Instance.from_problem(loop))) for variant in VARIANTS]
    assert theirs == ours
    assert zbv.zbv_orders(vee) == zbv_orders(Instance.from_problem(vee))

"""The ``cpsat`` method: proven optima are right, schedules validate, limits hold (determinism: test_determinism.py)."""

from __future__ import annotations

import pytest

from pipesched.solver import Instance, Problem, SolveOptions, solve, validate
from pipesched.solver.bounds.combinatorial import (
    combinatorial_bound,
    energy_bound,
    round_trip_span_bound,
)
from pipesched.solver.bounds.feasibility import infeasibility_reason
from pipesched.solver.core.metrics import bubble_ratio
from pipesched.solver.exact.cpsat.scaling import Scaling

UNEVEN = {"forward": [1.0, 2.0, 1.5], "backward_input": [1.0, 1.5, 2.0], "backward_weight": [0.5, 0.25, 0.75],
          "comm": 0.25}

#: Tiny cases (brute force can enumerate them) over objectives, limits, comm, fused B and placements.
TINY: dict[str, dict] = {
    "unit-2x3": dict(devices=2, microbatches=3),
    "unit-limit": dict(devices=3, microbatches=4, memory={"limit": 2}),
    "unit-span-limit": dict(devices=3, microbatches=4, memory={"limit": 2}, objective="stage_span"),
    "uneven-comm": dict(devices=3, microbatches=3, costs=UNEVEN),
    "uneven-span": dict(devices=3, microbatches=3, costs=UNEVEN, memory={"limit": 2}, objective="stage_span"),
    "fused": dict(devices=2, microbatches=3, split_backward=False, memory={"limit": 1}),
    "loop-v2": dict(devices=2, microbatches=2, stages_per_device=2, memory={"limit": 3}),
    "v-shape": dict(devices=2, microbatches=3, stages_per_device=2, placement="v", objective="stage_span"),
}


def run(case: dict, method: str = "cpsat", limit: float = 20.0):
    return solve(Problem(**case), method, SolveOptions(time_limit_s=limit))


@pytest.fixture(scope="module")
def tiny_results() -> dict:
    return {name: run(case) for name, case in TINY.items()}


def test_cpsat_proves_every_tiny_case_optimal_and_the_schedule_validates(tiny_results: dict) -> None:
    for name, sched in tiny_results.items():
        assert sched.status == "optimal", name
        assert sched.lower_bound == sched.objective_value, name
        assert validate(sched) == [], name


def test_cpsat_optimum_matches_brute_force(tiny_results: dict) -> None:
    import bruteforce
    for name, case in TINY.items():
        expected = bruteforce.optimum(Problem(**case))
        if expected is not None:
            assert tiny_results[name].objective_value == pytest.approx(expected, abs=1e-6), name


def test_cpsat_is_never_worse_than_any_heuristic_that_fits(tiny_results: dict) -> None:
    for name, case in TINY.items():
        for other in ("gpipe", "1f1b", "zb-h1", "zb-h2", "greedy"):
            try:
                sched = run(case, other)
            except ValueError:
                continue  # does not apply, or over the memory limit
            assert tiny_results[name].objective_value <= sched.objective_value + 1e-9, (name, other)


def test_unlimited_unit_makespan_meets_the_ramp_up_bound() -> None:
    sched = run(dict(devices=4, microbatches=6))
    assert sched.status == "optimal"
    assert sched.makespan == (4 - 1) * 1 + 6 * 3


def test_strong_bounds_never_exceed_the_proven_optimum(tiny_results: dict) -> None:
    for name, case in TINY.items():
        inst = Instance.from_problem(Problem(**case))
        opt = tiny_results[name].objective_value
        assert combinatorial_bound(inst) <= opt + 1e-9, name
        assert energy_bound(inst) <= opt + 1e-9, name
        assert round_trip_span_bound(inst) <= opt + 1e-9, name


def test_round_trip_bound_is_binding_under_a_tight_limit() -> None:
    inst = Instance.from_problem(Problem(**TINY["unit-span-limit"]))
    assert round_trip_span_bound(inst) > max(inst.device_work())


def zb_problem(limit_factor: int) -> Problem:
    """Zero-bubble paper, 1.5B model (h = 2304, a = 24, s = 1024), p = 8, m = 24."""
    mb, mw = 34 * 2304 + 5 * 24 * 1024, 32 * 2304
    return Problem(devices=8, microbatches=24, objective="stage_span",
                   costs={"forward": 18.522, "backward_input": 18.086, "backward_weight": 9.337, "comm": 0.601},
                   memory={"forward": mb, "backward_input": mw - mb, "backward_weight": -mw,
                           "limit": limit_factor * 8 * mb})


def test_zero_bubble_1p_case_is_proven_optimal_at_the_published_rate() -> None:
    sched = run(zb_problem(1).model_dump(), limit=10.0)
    assert sched.status == "optimal"
    assert sched.bubble_ratio == pytest.approx(0.1585, abs=5e-5)


def test_scaling_is_exact_for_millisecond_costs_and_rounds_down_otherwise() -> None:
    sc = Scaling.of(Instance.from_problem(zb_problem(1)))
    assert (sc.time, sc.time_exact, sc.mem_exact) == (1000, True, True)
    odd = Problem(devices=2, microbatches=2, costs={"forward": 1 / 3, "backward_input": 2 ** 0.5})
    sc = Scaling.of(Instance.from_problem(odd))
    assert not sc.time_exact and sc.dur(1 / 3) <= sc.time / 3
    sched = run(odd.model_dump())
    assert validate(sched) == [] and sched.lower_bound <= sched.objective_value


@pytest.mark.parametrize("case, needle", [
    (dict(devices=2, microbatches=2, memory={"limit": 0.5}), "device 0"),
    (dict(devices=2, microbatches=2, stages_per_device=2, placement="v", memory={"limit": 1.5}), "at least 2"),
])
def test_a_limit_below_one_microbatch_is_infeasible_without_search(case: dict, needle: str) -> None:
    for method in ("cpsat", "auto"):
        sched = run(case, method)
        assert sched.status == "infeasible" and not sched.ops
        assert "memory.limit" in sched.reason and needle in sched.reason


def test_a_limit_equal_to_one_microbatch_is_feasible() -> None:
    case = dict(devices=2, microbatches=3, stages_per_device=2, placement="v", memory={"limit": 2})
    assert infeasibility_reason(Instance.from_problem(Problem(**case))) is None
    sched = run(case)
    assert sched.status == "optimal" and max(sched.peak_memory) <= 2


def test_a_case_it_cannot_close_within_the_limit_still_returns_a_valid_schedule() -> None:
    """Wall time against the limit is measured in ``benchmarks/auto_time_limits.py``, not asserted here."""
    case = dict(devices=8, microbatches=32, memory={"limit": 3})
    sched = run(case, limit=3.0)
    assert sched.ops and validate(sched) == []


def test_bubble_ratio_of_a_bound_is_not_above_the_schedules() -> None:
    sched = run(TINY["uneven-span"])
    inst = Instance.from_problem(sched.problem)
    assert bubble_ratio(inst, sched.lower_bound) <= sched.bubble_ratio + 1e-12


#: Memory-tight tiny cases (limits below p) where brute force is fast, both objectives, fused backward.
TIGHT = [dict(devices=p, microbatches=m, memory={"limit": limit}, objective=obj, split_backward=split)
         for p, m in ((2, 4), (2, 5), (3, 3), (3, 4)) for limit in range(1, p)
         for obj in ("makespan", "stage_span") for split in (True, False)
         if not (p == 3 and m == 4 and obj == "stage_span" and split)]  # brute force takes seconds there


@pytest.mark.parametrize("case", TIGHT, ids=lambda c: "-".join(str(v) for v in (
    c["devices"], c["microbatches"], c["memory"]["limit"], c["objective"], c["split_backward"])))
def test_energy_bound_and_cpsat_match_the_brute_force_optimum_under_tight_memory(case: dict) -> None:
    from bruteforce import optimum

    expected = optimum(Problem(**case))
    assert expected is not None
    inst = Instance.from_problem(Problem(**case))
    assert energy_bound(inst) <= expected + 1e-9
    assert combinatorial_bound(inst) <= expected + 1e-9
    # the same brute force checks the model's memory chains (exact here: unit deltas, one stage per device)
    sched = run(case)
    assert sched.status == "optimal"
    assert sched.objective_value == pytest.approx(expected)


def test_ramps_raise_the_energy_bound_above_the_plain_rate() -> None:
    from pipesched.solver.bounds.combinatorial import ramp_span

    # unit costs, p = 8, limit 4, first device: 8 microbatches hold 1 unit for 17 (round trip 15 + B + W)
    assert ramp_span(8 * 17, 4, 1, 1, 1) == pytest.approx(37)  # plain energy / L is 34; each ramp loses 6 / 4
    inst = Instance.from_problem(Problem(devices=4, microbatches=16, memory={"limit": 2}))
    assert energy_bound(inst) == pytest.approx(73)  # plain: 16 * 9 / 2 = 72


@pytest.mark.parametrize(("case", "expected"), [
    (dict(devices=4, microbatches=8, memory={"limit": 3}), True),  # unit deltas: chains are the whole cap
    (dict(devices=4, microbatches=8, memory={"limit": 3}, split_backward=False), True),
    (dict(devices=2, microbatches=4, stages_per_device=2, memory={"limit": 3}), False),  # two stages share it
    (dict(devices=4, microbatches=8, memory={"forward": 3, "backward_input": -1, "backward_weight": -2,
                                                "limit": 7}), False),  # B frees part: the cumulative stays
    (dict(devices=4, microbatches=8), False),  # no cap at all
])
def test_memory_chains_replace_the_cumulative_only_when_exact(case: dict, expected: bool) -> None:
    from pipesched.solver.exact.cpsat.formulation import OpGraph, build

    inst = Instance.from_problem(Problem(**case))
    sc = Scaling.of(inst)
    cm = build(inst, sc, OpGraph.full(inst, sc), horizon=1000, lower=0, upper=1000)
    assert cm.precedences_only is expected
    has_cumulative = any(c.has_cumulative() for c in cm.model.proto.constraints)
    assert has_cumulative is (not expected and "limit" in case.get("memory", {}))

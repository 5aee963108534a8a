"""The V memory greedy's wide grid (``v_memory.wide_candidates``): valid orders within the cap, its
searched order never worse than its start, and orders the two-policy grid misses (issue 12 target 2)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from pipesched.solver import Instance, Problem, SolveOptions, solve
from pipesched.solver.core.metrics import peak_memory
from pipesched.solver.heuristics.listsched.policies import V_WIDE_GRID_ORDER
from pipesched.solver.heuristics.v_memory import (
    POLICIES,
    WIDE_GRID,
    vm_order,
    wide_candidates,
    wide_count,
)
from pipesched.solver.timing.finalize import finalize
from pipesched.solver.timing.retime import Incumbent, compact
from pipesched.solver.timing.simulate import DeadlockError
from pipesched.solver.timing.validate import validate

#: The zero-bubble paper's 6.2B and 1.5B profiles (Table 6), halved per chunk (memory: ``paper_v``).
HALF_62 = {"forward": 14.859, "backward_input": 14.722, "backward_weight": 9.9635, "comm": 0.527}
HALF_15 = {"forward": 9.261, "backward_input": 9.043, "backward_weight": 4.669, "comm": 0.601}


def paper_v(p: int, m: int, cap: float, costs: dict[str, float], objective: str = "stage_span",
            mb: float = 100608.0, mw: float = 36864.0) -> Problem:
    return Problem(devices=p, microbatches=m, stages_per_device=2, placement="v", objective=objective,
                   costs=costs, memory={"forward": mb, "backward_input": mw - mb, "backward_weight": -mw,
                                        "limit": cap * 2 * p * mb})


def _grid_best(inst: Instance, policies: tuple) -> float:
    best = math.inf
    for pol in policies:
        try:
            best = min(best, Incumbent.of(inst, vm_order(inst, pol)).objective)
        except DeadlockError:
            continue
    return best


def test_the_order_ranks_every_wide_policy_once() -> None:
    assert sorted(V_WIDE_GRID_ORDER) == list(range(len(WIDE_GRID))) and len(WIDE_GRID) == 96
    assert all(pol.extra is None for pol in WIDE_GRID)
    assert wide_count(0) == 0 and wide_count(10) == 10 and wide_count(10**6) == len(WIDE_GRID)


@settings(max_examples=20, deadline=None)
@given(p=st.integers(1, 4), m=st.integers(1, 9), cap=st.sampled_from([1.0, 1.25, 1.5, 2.0]),
       objective=st.sampled_from(["makespan", "stage_span"]), trials=st.integers(0, 40))
def test_wide_orders_are_valid_within_the_cap_and_the_search_never_worsens(p: int, m: int, cap: float,
                                                                           objective: str, trials: int) -> None:
    problem = paper_v(p, m, cap, HALF_15, objective)
    inst = Instance.from_problem(problem)
    found = wide_candidates(inst, [], trials)
    if found:
        assert found[0][1].objective >= found[1][1].objective - 1e-9  # the start, then its search
    for _, inc in found:
        assert all(pk <= c * (1 + 1e-9) for pk, c in zip(peak_memory(inst, inc.order), inst.limit, strict=True))
        assert not validate(finalize(problem, "test", compact(inst, inc.order), solve_time_s=0.0, inst=inst))


def test_the_wide_grid_beats_the_two_policy_grid_and_v_memory_keeps_it() -> None:
    """6.2B, p = 4, m = 16, 1.5p (a tuning case): memory-alone admission finds 1265.42 where the
    two-policy grid's best is 1276.13; ``v-memory`` returns at most the wide grid's best."""
    problem = paper_v(4, 16, 1.5, HALF_62, mb=151552.0, mw=65536.0)
    inst = Instance.from_problem(problem)
    wide = _grid_best(inst, WIDE_GRID)
    assert wide < _grid_best(inst, POLICIES) - 1.0
    assert solve(problem, "v-memory", SolveOptions(time_limit_s=10)).objective_value <= wide + 1e-6

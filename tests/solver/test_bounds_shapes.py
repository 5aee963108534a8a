"""Every closed-form bound stays at or below the brute-forced optimum on the zero-bubble memory shape.

The zero-bubble paper's memory (Qi et al., ICLR 2024): F allocates ``M_B``, B frees ``M_B - M_W``
and W the remaining ``M_W``; caps of ``k`` microbatches (``k = p`` is the paper's "1p"). The
"optimal" rows of ``benchmarks/zb_paper.py`` rest on these bounds meeting the objective, so they
are checked here on that shape, with uneven stages, comm, loop and V placements and both
objectives, against :mod:`bruteforce` (which uses none of them). Sizes stay tiny for brute force.
The CP-SAT relaxation bounds (``device_bound``, ``relaxation_bound``) are checked the same way.
"""

from __future__ import annotations

import functools

import pytest
from bruteforce import optimum

from pipesched.solver import Instance, Problem
from pipesched.solver.bounds.analytic import lower_bound
from pipesched.solver.bounds.combinatorial import (
    combinatorial_bound,
    energy_bound,
    relay_bound,
    round_trip_span_bound,
)
from pipesched.solver.exact.cpsat.relaxations import device_bound, relaxation_bound

#: F takes 1.0, B gives back 0.4, W the remaining 0.6 (M_W / M_B = 0.6).
ZB_MEMORY = {"forward": 1.0, "backward_input": -0.4, "backward_weight": -0.6}
PAPER = {"forward": 18.522, "backward_input": 18.086, "backward_weight": 9.337, "comm": 0.601}
UNEVEN = {"forward": [1.0, 2.0], "backward_input": [1.5, 2.0], "backward_weight": [0.5, 1.0], "comm": 0.25}
UNEVEN_V = {"forward": [1.0, 2.0, 1.5, 1.0], "backward_input": [1.0, 2.0, 1.0, 1.5],
            "backward_weight": 0.5, "comm": 0.25}

CASES = {
    f"{name}-{objective}-cap{cap}": dict(objective=objective, memory={**ZB_MEMORY, "limit": cap}, **shape)
    for objective in ("makespan", "stage_span")
    for name, shape, caps in (
        ("paper-p2m4", dict(devices=2, microbatches=4, costs=PAPER), (1, 2, 4)),
        ("paper-p2m5", dict(devices=2, microbatches=5, costs=PAPER), (2, 3)),
        ("uneven-p2m4", dict(devices=2, microbatches=4, costs=UNEVEN), (1, 2, 3)),
        ("loop-v2-p2m2", dict(devices=2, microbatches=2, stages_per_device=2, costs=UNEVEN_V), (2, 3)),
        ("v-v2-p2m2", dict(devices=2, microbatches=2, stages_per_device=2, placement="v", costs=UNEVEN_V), (2, 3)),
    )
    for cap in caps
}

BOUNDS = {"analytic": lower_bound, "relay": relay_bound, "round_trip": round_trip_span_bound,
          "energy": energy_bound, "combinatorial": combinatorial_bound}


@functools.cache
def _optimum(name: str) -> float | None:
    """The brute-forced optimum of ``CASES[name]`` (computed once: both tests below compare with it)."""
    return optimum(Problem(**CASES[name]))


@pytest.mark.parametrize("name", sorted(CASES))
def test_no_bound_exceeds_the_brute_forced_optimum_on_the_zero_bubble_shape(name: str) -> None:
    problem = Problem(**CASES[name])
    best = _optimum(name)
    assert best is not None, f"{name}: no schedule fits the cap"
    inst = Instance.from_problem(problem)
    for bound_name, bound in BOUNDS.items():
        value = bound(inst)
        assert value <= best + 1e-9 * max(1.0, best), (
            f"{bound_name} bound {value} > optimum {best}: {problem.model_dump_json()}")


def _no_schedule_exceeds(inst: Instance) -> float:
    """An upper bound independent of every solver: all work plus comm on every cross-device edge
    (the least solution of any order's difference constraints ends by then)."""
    crossings = sum(lag > 0 for op in inst.ops() for _, lag in inst.predecessors(op))
    return inst.total_work() + crossings * inst.comm


@pytest.mark.parametrize("name", sorted(CASES))
def test_no_cpsat_relaxation_bound_exceeds_the_brute_forced_optimum_on_the_zero_bubble_shape(name: str) -> None:
    """The single-device relaxations CP-SAT proves (``exact/cpsat/relaxations.py``), each device on
    its own and combined as ``auto`` combines them, on the same shape and against the same oracle.
    The upper bound handed to them is solver-free, so a relaxation cannot borrow the optimum. Short
    budgets: whatever a relaxation proves in any time must stay below the optimum, so the check
    does not depend on where the search stops."""
    problem = Problem(**CASES[name])
    best = _optimum(name)
    assert best is not None, f"{name}: no schedule fits the cap"
    inst = Instance.from_problem(problem)
    upper = _no_schedule_exceeds(inst)
    assert upper >= best
    proven = [device_bound(inst, d, 1.0, upper=upper, dtime=0.2) for d in range(inst.devices)]
    assert any(b is not None for b in proven), f"{name}: no relaxation proved anything, nothing checked"
    for d, value in enumerate(proven):
        assert value is None or value <= best + 1e-9 * max(1.0, best), (
            f"device {d} relaxation bound {value} > optimum {best}: {problem.model_dump_json()}")
    combined = relaxation_bound(inst, 2.0, upper=upper, dtime=0.4)
    assert combined <= best + 1e-9 * max(1.0, best), (
        f"relaxation_bound {combined} > optimum {best}: {problem.model_dump_json()}")

"""The V-turn bound never exceeds the brute-forced optimum, and it is the bound that bites on a tight V.

Tiny V problems (p = 2, v = 2) with the zero-bubble memory shape (F takes 1, B gives back 0.4, W
the rest), uneven stages, comm, caps from one microbatch per chunk upwards, both objectives and
fused backward, against :mod:`bruteforce` (which uses no bound of the library).
"""

from __future__ import annotations

import pytest
from bruteforce import optimum

from pipesched.solver import Instance, Problem
from pipesched.solver.bounds.analytic import device_span_bounds
from pipesched.solver.bounds.combinatorial import combinatorial_bound, energy_bound, relay_bound
from pipesched.solver.bounds.v_turn import v_turn_bound, v_turn_spans

ZB_MEMORY = {"forward": 1.0, "backward_input": -0.4, "backward_weight": -0.6}
COSTS = {
    "uneven": {"forward": [1.0, 2.0, 1.5, 1.0], "backward_input": [1.0, 2.0, 1.0, 1.5],
               "backward_weight": 0.5, "comm": 0.25},
    "paper-half": {"forward": 9.261, "backward_input": 9.043, "backward_weight": 4.669, "comm": 0.601},
    "slow-turn": {"forward": [0.5, 3.0, 3.0, 0.5], "backward_input": [0.5, 2.0, 2.5, 0.5],
                  "backward_weight": [0.25, 1.0, 1.0, 0.25], "comm": 0.5},
}

CASES = {
    f"{name}-m{m}-{objective}-cap{cap}{'-fused' if not split else ''}": dict(
        devices=2, microbatches=m, stages_per_device=2, placement="v", objective=objective,
        split_backward=split, costs=costs, memory={**ZB_MEMORY, "limit": cap})
    for name, costs in COSTS.items()
    for objective in ("makespan", "stage_span")
    for m, caps in ((2, (2, 2.6, 3, 4)), (3, (2, 3)))
    for cap in caps
    for split in (True, False)
}
CASES |= {  # three devices: a longer turn for device 0, none for the middle one
    f"p3-m2-{objective}-cap{cap}": dict(
        devices=3, microbatches=2, stages_per_device=2, placement="v", objective=objective,
        costs={"forward": [1.0, 1.5, 1.0, 2.0, 1.0, 1.0], "backward_input": 1.0, "backward_weight": 0.5,
               "comm": 0.25},
        memory={**ZB_MEMORY, "limit": cap})
    for objective, caps in (("makespan", (2, 3)), ("stage_span", (2,)))  # span at cap 3: ~2 min of brute force
    for cap in caps
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_v_turn_bound_never_exceeds_the_brute_forced_optimum(name: str) -> None:
    problem = Problem(**CASES[name])
    best = optimum(problem)
    assert best is not None, f"{name}: no schedule fits the cap"
    inst = Instance.from_problem(problem)
    for value in (v_turn_bound(inst), combinatorial_bound(inst)):
        assert value <= best + 1e-9 * max(1.0, best), f"bound {value} > optimum {best}: {problem.model_dump_json()}"


def test_v_turn_bound_beats_the_other_bounds_when_the_cap_stops_the_warm_up() -> None:
    """With room for one chunk-0 forward and the turn's forward, device 0 idles while the microbatch
    goes down and back: the other one-device closed-form bounds do not see it, the V-turn bound does
    (the turn relay, :mod:`~pipesched.solver.bounds.turn_relay`, part of ``lower_bound``, sees more)."""
    inst = Instance.from_problem(Problem(**CASES["paper-half-m2-stage_span-cap2"]))
    others = max(max(device_span_bounds(inst)), relay_bound(inst), energy_bound(inst))
    assert v_turn_bound(inst) > others * 1.1
    assert v_turn_spans(inst)[0] > inst.device_work()[0] + 10.0


def test_v_turn_bound_is_zero_off_the_v_placement() -> None:
    loop = Problem(devices=2, microbatches=2, stages_per_device=2, memory={**ZB_MEMORY, "limit": 2})
    assert v_turn_bound(Instance.from_problem(loop)) == 0.0

"""The relay bound: valid against brute force wherever it binds, and it closes the paper's ZB-2p case."""

from __future__ import annotations

import pytest

from pipesched.solver import Instance, Problem
from pipesched.solver.bounds.combinatorial import combinatorial_bound, relay_bound
from pipesched.solver.core.metrics import bubble_ratio

#: A last stage much busier with F + B than the first stage is with F + B + W: the relay binds.
HEAVY_LAST = {"forward": [1.0, 1.0, 3.0], "backward_input": [1.0, 1.0, 3.0], "backward_weight": [0.5, 0.5, 0.5],
              "comm": 0.25}
CASES = {
    "span": dict(devices=3, microbatches=2, costs=HEAVY_LAST, objective="stage_span"),
    "span-limit": dict(devices=3, microbatches=3, costs=HEAVY_LAST, objective="stage_span", memory={"limit": 2}),
    "makespan": dict(devices=3, microbatches=2, costs=HEAVY_LAST),
    "fused-span": dict(devices=3, microbatches=3, costs=HEAVY_LAST, objective="stage_span", split_backward=False),
    "loop-v2-span": dict(devices=2, microbatches=2, stages_per_device=2, objective="stage_span",
                         costs={"forward": [1.0, 1.0, 1.0, 3.0], "backward_input": [1.0, 1.0, 1.0, 3.0],
                                "backward_weight": 0.5, "comm": 0.25}),
    "v-shape-span": dict(devices=2, microbatches=2, stages_per_device=2, placement="v", objective="stage_span",
                         costs={"forward": [1.0, 3.0, 1.0, 1.0], "backward_input": [1.0, 3.0, 1.0, 1.0],
                                "backward_weight": 0.5, "comm": 0.25}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_relay_bound_never_exceeds_the_brute_force_optimum(name: str) -> None:
    from bruteforce import optimum

    problem = Problem(**CASES[name])
    expected = optimum(problem)
    assert expected is not None
    inst = Instance.from_problem(problem)
    assert relay_bound(inst) <= expected + 1e-9
    assert combinatorial_bound(inst) <= expected + 1e-9


def test_relay_bound_binds_above_every_devices_work() -> None:
    inst = Instance.from_problem(Problem(**CASES["span"]))
    # device 0: F + B of stage 2 twice, the trips there and back, and W(0) closing the window
    assert relay_bound(inst) == pytest.approx(1 + 0.25 + 1 + 0.25 + 2 * 6 + 0.25 + 1 + 0.25 + 1 + 0.5)
    assert relay_bound(inst) > max(inst.device_work())


def test_relay_bound_gives_the_published_zb2p_bubble_of_the_1_5b_m24_case() -> None:
    """Qi et al. (ICLR 2024), Table 5: ZB-2p 4.33 % for the 1.5B model at p = 8, m = 24."""
    mb, mw = 34 * 2304 + 5 * 24 * 1024, 32 * 2304
    problem = Problem(devices=8, microbatches=24, objective="stage_span",
                      costs={"forward": 18.522, "backward_input": 18.086, "backward_weight": 9.337, "comm": 0.601},
                      memory={"forward": mb, "backward_input": mw - mb, "backward_weight": -mw, "limit": 16 * mb})
    inst = Instance.from_problem(problem)
    assert bubble_ratio(inst, relay_bound(inst)) == pytest.approx(0.0433, abs=5e-5)

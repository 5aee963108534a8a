"""ZB-H1 and ZB-H2, the handcrafted zero-bubble schedules of Qi et al., "Zero Bubble (Almost)
Pipeline Parallelism", ICLR 2024 (v = 1, split backward).

Both are 1F1B with the weight-gradient pass W held back (:func:`lagged_order`):

* ZB-H1 keeps 1F1B's warm-up (``p - 1 - d`` forwards) and delays device ``d``'s Ws by ``d``
  backwards, so every device holds at most ``p`` microbatches (1F1B's peak) while the Bs travel
  the pipeline at speed B and the late Ws fill the tail. Per-device span with uniform costs and
  no comm: ``m(F + B + W) + (p - 1)(F + B - W)``.
* ZB-H2 fills the warm-up bubble with ``2(p - 1 - d) + 1`` forwards and delays Ws by ``2d``
  (steady step B, W, F), turning the trapezoid into a parallelogram: at most ``2p - 1``
  microbatches live, span ``m(F + B + W) + (p - 1)(F + B - 2W)``, i.e. zero bubble when
  ``F + B = 2W``.

Both closed forms hold when ``W <= F`` and ``W <= B`` and there are enough microbatches to reach
the steady state (``m >= p`` for ZB-H1, ``m >= 2p - 1`` for ZB-H2); tests check exactly that regime.
"""

from __future__ import annotations

from ...core.instance import Instance
from ...core.problem import Problem
from ...core.schedule import Order
from ._common import needs_single_stage_loop, needs_split_backward, recipe
from .one_f_one_b import lagged_order


def _applies(name: str):
    def check(problem: Problem) -> str | None:
        return needs_single_stage_loop(name, problem) or needs_split_backward(name, problem)

    return check


def zb_h1_order(inst: Instance) -> Order:
    p = inst.devices
    return lagged_order(inst, [p - 1 - d for d in range(p)], list(range(p)), "FBW")


def zb_h2_order(inst: Instance) -> Order:
    p = inst.devices
    return lagged_order(inst, [2 * (p - 1 - d) + 1 for d in range(p)], [2 * d for d in range(p)], "BWF")


ZB_H1 = recipe(
    "zb-h1",
    "ZB-H1 (Qi et al. 2024): 1F1B with W delayed d steps on device d; 1F1B's peak memory, "
    "bubble (p-1)(F+B-W); needs split_backward and stages_per_device = 1.",
    zb_h1_order,
    _applies("zb-h1"),
)


ZB_H2 = recipe(
    "zb-h2",
    "ZB-H2 (Qi et al. 2024): 2p-1 in-flight microbatches, bubble (p-1)(F+B-2W) (zero when "
    "F+B=2W); needs split_backward and stages_per_device = 1.",
    zb_h2_order,
    _applies("zb-h2"),
)

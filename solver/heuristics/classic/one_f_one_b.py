"""1F1B (PipeDream-flush; Narayanan et al., 2021) and the lagged-W family it shares with ZB-H1/H2.

Device ``d`` of ``p`` runs ``p - 1 - d`` warm-up forwards, then alternates one forward and one
backward, then drains the remaining backwards. With ``split_backward`` each W follows its B at
once. Peak activations: ``p - d`` microbatches on device ``d`` (``p`` on the first device).
With uniform costs and no comm every device spans ``(m + p - 1)(F + B + W)`` when the backward
is fused; with a split backward the B chain travels at speed B alone, which saves
``(p - 1) W`` on the first device: ``m(F + B + W) + (p - 1)(F + B)`` for ``m >= p``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...core.instance import Instance, OpId
from ...core.schedule import Order
from ._common import needs_single_stage_loop, recipe


def lagged_order(inst: Instance, warmup: Sequence[int], lag: Sequence[int], steady: str = "FBW") -> Order:
    """One-forward-one-backward order for ``v = 1`` with each W held back ``lag[d]`` backwards.

    Device ``d`` runs ``warmup[d]`` forwards, then for every microbatch ``k`` the steps named by
    ``steady`` (a permutation of "FBW"): the next forward (while any remain), ``B(k)``, and
    ``W(k - lag[d])`` (once ``k >= lag[d]``); the held-back Ws close the device's list.
    ``lag = 0`` is 1F1B; ZB-H1 and ZB-H2 (Qi et al., 2024) choose other warm-ups and lags.
    Fused backward (no W) ignores ``lag``. Needs ``warmup[d] >= 1`` when B precedes F in ``steady``.
    """
    m = inst.microbatches
    order: Order = []
    for d in range(inst.devices):
        stage = inst.stages_of_device[d][0]
        ops: list[OpId] = []
        forwards = min(m, warmup[d])
        ops.extend(OpId("F", stage, i) for i in range(forwards))
        weights = 0
        for k in range(m):
            for step in steady:
                if step == "F" and forwards < m:
                    ops.append(OpId("F", stage, forwards))
                    forwards += 1
                elif step == "B":
                    ops.append(OpId("B", stage, k))
                elif step == "W" and inst.split_backward and k >= lag[d]:
                    ops.append(OpId("W", stage, weights))
                    weights += 1
        if inst.split_backward:
            ops.extend(OpId("W", stage, i) for i in range(weights, m))
        order.append(ops)
    return order


def one_f_one_b_order(inst: Instance) -> Order:
    p = inst.devices
    return lagged_order(inst, [p - 1 - d for d in range(p)], [0] * p, "FBW")


ONE_F_ONE_B = recipe(
    "1f1b",
    "1F1B: p-1-d warm-up forwards, then one forward / one backward (W right after B); "
    "peak p microbatches; needs stages_per_device = 1.",
    one_f_one_b_order,
    lambda problem: needs_single_stage_loop("1f1b", problem),
)

"""GPipe (Huang et al., 2019): every forward of the step, then every backward.

Peak activations are m microbatches per stage; per-device span (m + p - 1)(F + B + W) with
uniform costs and no comm.
"""

from __future__ import annotations

from ...core.instance import Instance, OpId
from ...core.problem import Problem
from ...core.registry import SolveOptions, method
from ...core.schedule import Order, Schedule
from ...timing.finalize import from_order


def gpipe_order(inst: Instance) -> Order:
    order: Order = []
    for stages in inst.stages_of_device:
        ops = [OpId("F", s, i) for s in stages for i in range(inst.microbatches)]
        for s in reversed(stages):
            for i in range(inst.microbatches):
                ops.append(OpId("B", s, i))
                if inst.split_backward:
                    ops.append(OpId("W", s, i))
        order.append(ops)
    return order


@method("gpipe", "GPipe: all forwards, then all backwards (W right after B). Any placement.")
def solve_gpipe(problem: Problem, options: SolveOptions) -> Schedule:
    inst = Instance.from_problem(problem)
    return from_order(problem, "gpipe", gpipe_order(inst), inst=inst)

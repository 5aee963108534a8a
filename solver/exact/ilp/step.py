"""The step's tail in the ILP (:mod:`pipesched.solver.core.step`): gradient syncs on one lane per
device, then the optimizer step, so the objective is the step's end.

- ``y_s >= x_j + d_j`` for every last-kind op ``j`` (W, or B when fused) of stage ``s``;
- a device's syncs do not overlap, big-M on a binary per pair of its stages:
  ``y_t >= y_s + g_s - M (1 - z_st)`` and ``y_s >= y_t + g_t - M z_st``, ``M = H + max g``;
- ``u_d >= y_s + g_s`` for the device's stages and ``u_d >= x_j + d_j`` for its ops;
- makespan ``Z >= u_d + o_d``; stage span ``Z >= u_d + o_d - f_d``.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...core.instance import OpId
from ...core.step import op_ends, step_tail
from .model import IlpModel, new_var


def add_step_tail(model: IlpModel) -> None:
    inst, prob, x = model.inst, model.prob, model.start
    if not inst.tail:
        return
    assert model.objective is not None
    kind = "W" if inst.split_backward else "B"
    big = model.horizon + max(inst.sync, default=0.0)
    for d, dev_ops in enumerate(model.device_ops()):
        stages = inst.stages_of_device[d]
        y = {s: new_var(prob, f"ys{s}", 0, model.horizon) for s in stages}
        for op in dev_ops:
            if op.kind == kind:
                prob += y[op.stage] >= x[op] + inst.cost(op)
        for k, s in enumerate(stages):
            for t in stages[k + 1:]:
                z = model.sync_pair[(s, t)] = new_var(prob, f"zs{s}_{t}", 0, 1, "Binary")
                prob += y[t] >= y[s] + inst.sync[s] - big * (1 - z)
                prob += y[s] >= y[t] + inst.sync[t] - big * z
        u = model.step_start[d] = new_var(prob, f"u{d}", 0, model.horizon)
        for s in stages:
            prob += u >= y[s] + inst.sync[s]
        for op in dev_ops:
            prob += u >= x[op] + inst.cost(op)
        end = u + inst.optimizer[d]
        if inst.objective == "stage_span":
            if d in model.first:
                prob += model.objective >= end - model.first[d]
        else:
            prob += model.objective >= end
        model.sync_start.update(y)


def step_warm_start(model: IlpModel, start: Mapping[OpId, float], put: object) -> None:
    """The tail the warm start's ops get: its sync and optimizer starts, its lane order."""
    if not model.inst.tail:
        return
    tail = step_tail(model.inst, op_ends(model.inst, start))
    rank = {s: k for k, (_, s, _, _) in enumerate(tail.syncs)}
    for _, s, a, _ in tail.syncs:
        put(model.sync_start[s], a)  # type: ignore[operator]
    for d, a, _ in tail.steps:
        put(model.step_start[d], a)  # type: ignore[operator]
    for (s, t), z in model.sync_pair.items():
        put(z, 1.0 if rank[s] < rank[t] else 0.0)  # type: ignore[operator]


"""Export a schedule as torch.distributed.pipelining's ``compute_only`` CSV (no torch import).

torch's ``_PipelineScheduleRuntime._load_csv(path)`` reads one CSV row per pipeline rank; each
cell is an action ``{stage}{type}{microbatch}`` with the stage in model order (torch infers the
stage -> rank map from which row a stage appears in, so loop and V placement need nothing
extra). Types: ``F`` forward, ``I`` input-gradient backward (our B when the backward is split),
``W`` weight-gradient backward, ``B`` fused backward (our B when ``split_backward`` is false).
torch then lowers this plan itself (adds SEND/RECV and REDUCE_GRAD, which divides the summed
microbatch gradients by m when ``scale_grads=True``).
"""

from __future__ import annotations

from ..core.instance import OpId
from ..core.schedule import Schedule

_TORCH_TYPE_SPLIT = {"F": "F", "B": "I", "W": "W"}
_TORCH_TYPE_FUSED = {"F": "F", "B": "B"}


def dependency_rank(op: OpId, num_stages: int) -> int:
    """Position of ``op`` in its microbatch's dependency chain F(0..S-1) -> B(S-1..0) -> W.

    Used to break ties between ops with equal times (zero-cost ops), so that a tie never
    puts an op before one it depends on.
    """
    if op.kind == "F":
        return op.stage
    if op.kind == "B":
        return 2 * num_stages - 1 - op.stage
    return 2 * num_stages + op.stage


def rank_programs(schedule: Schedule) -> list[list[OpId]]:
    """Each device's ops in execution order: by start, then end, then dependency position.

    Unlike sorting by op name, the tie-break is safe for zero-cost ops (F before B at the last
    stage, B(s+1) before B(s) at a V turn).
    """
    if not schedule.ops:
        raise ValueError(
            f"schedule from method {schedule.method!r} has status {schedule.status!r} and no ops to export"
            + (f" ({schedule.reason})" if schedule.reason else "")
        )
    stages = schedule.problem.num_stages
    per: list[list] = [[] for _ in range(schedule.problem.devices)]
    for o in schedule.ops:
        per[o.device].append(o)
    return [
        [o.id for o in sorted(ops, key=lambda o: (o.start, o.end, dependency_rank(o.id, stages), o.microbatch))]
        for ops in per
    ]


def torch_action(op: OpId, split_backward: bool) -> str:
    """The torch action string of one op, e.g. ``F(stage 3, mb 0)`` -> ``3F0``, split B -> ``3I0``."""
    table = _TORCH_TYPE_SPLIT if split_backward else _TORCH_TYPE_FUSED
    return f"{op.stage}{table[op.kind]}{op.microbatch}"


def to_torch_csv(schedule: Schedule) -> str:
    """torch's ``compute_only`` CSV for ``schedule``: row r lists rank r's actions in order."""
    split = schedule.problem.split_backward
    rows = [",".join(torch_action(op, split) for op in ops) for ops in rank_programs(schedule)]
    return "\n".join(rows) + "\n"

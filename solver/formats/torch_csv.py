"""Export a schedule as torch.distributed.pipelining's ``compute_only`` CSV (no torch import).

torch's ``_PipelineScheduleRuntime._load_csv(path)`` reads one CSV row per pipeline rank; each
cell is an action ``{stage}{type}{microbatch}`` with the stage in model order (torch infers the
stage -> rank map from which row a stage appears in, so loop and V placement need nothing
extra). Types: ``F`` forward, ``I`` input-gradient backward (our B when the backward is split),
``W`` weight-gradient backward, ``B`` fused backward (our B when ``split_backward`` is false).
torch then lowers this plan itself (adds SEND/RECV and REDUCE_GRAD, which divides the summed
microbatch gradients by m when ``scale_grads=True``).

Overlapped F&B pairs (``costs.overlap_fb``; two ops with equal device, start and end) become torch
2.13's ``OVERLAP_F_B`` action, whose text form lists the sub-actions: ``(3F7;5I2)OVERLAP_F_B``.

``placement: "dual"`` has no torch equivalent: torch's schedules run one copy of the model with one
stage id per module (its ``DualPipeV`` is our ``dualpipe-v`` on the V placement), so a dual schedule
(two copies of each model stage, twin gradients summed) is refused by name rather than written as a
CSV torch would misread.
"""

from __future__ import annotations

from ..core.errors import NotApplicableError
from ..core.instance import Instance, OpId
from ..core.ops import dependency_rank
from ..core.schedule import Order, Schedule
from ..timing.pairs import timed_pairs

#: ``dependency_rank`` is re-exported for the runtime's plan, which imports it from here.
__all__ = ["dependency_rank", "rank_programs", "to_torch_csv", "torch_action", "torch_actions"]

_TORCH_TYPE_SPLIT = {"F": "F", "B": "I", "W": "W"}
_TORCH_TYPE_FUSED = {"F": "F", "B": "B"}


def rank_programs(schedule: Schedule) -> list[list[OpId]]:
    """Each device's ops in execution order: :meth:`Schedule.order`, the one order every consumer reads
    (by start, then end; ops with equal times keep the order the method ran them in, which is the
    order the validator checked memory in)."""
    if not schedule.ops:
        raise ValueError(
            f"schedule from method {schedule.method!r} has status {schedule.status!r} and no ops to export"
            + (f" ({schedule.reason})" if schedule.reason else "")
        )
    return schedule.order()


def torch_action(op: OpId, split_backward: bool) -> str:
    """The torch action string of one op, e.g. ``F(stage 3, mb 0)`` -> ``3F0``, split B -> ``3I0``."""
    table = _TORCH_TYPE_SPLIT if split_backward else _TORCH_TYPE_FUSED
    return f"{op.stage}{table[op.kind]}{op.microbatch}"


def torch_actions(order: Order, split_backward: bool, pairs: dict[OpId, OpId] | None = None) -> list[list[str]]:
    """The lowering pass: our per-device order -> torch's per-rank compute actions (``3F0``, ``3I0``, ...);
    each F&B pair in ``pairs`` -> one ``(F;B)OVERLAP_F_B`` action where its first half stands."""
    pairs = pairs or {}
    rows = []
    for ops in order:
        row: list[str] = []
        done: set[OpId] = set()
        for op in ops:
            partner = pairs.get(op)
            if partner is None:
                row.append(torch_action(op, split_backward))
            elif op not in done:
                f, b = (op, partner) if op.kind == "F" else (partner, op)
                row.append(f"({torch_action(f, split_backward)};{torch_action(b, split_backward)})OVERLAP_F_B")
                done.update((f, b))
        rows.append(row)
    return rows


def to_torch_csv(schedule: Schedule) -> str:
    """torch's ``compute_only`` CSV for ``schedule``: row r lists rank r's actions in order."""
    if schedule.problem.placement == "dual":
        raise NotApplicableError(
            "placement 'dual' (DualPipe, two copies of the model) has no torch.distributed.pipelining "
            "equivalent: torch has DualPipeV only (solve with placement 'v' and method dualpipe-v to export); "
            "pipesched's own runtime replays dual schedules"
        )
    pairs = timed_pairs(schedule.ops, Instance.from_problem(schedule.problem))
    rows = torch_actions(rank_programs(schedule), schedule.problem.split_backward, pairs)
    return "\n".join(",".join(row) for row in rows) + "\n"

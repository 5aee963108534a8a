"""Small pieces shared by the fixed recipes: applicability checks and microbatch trimming."""

from __future__ import annotations

from ...core.instance import OpId
from ...core.problem import Problem
from ...core.schedule import Order


def needs_single_stage_loop(name: str, problem: Problem) -> str | None:
    """Reason a v = 1 recipe does not apply (``None`` when it does)."""
    if problem.stages_per_device != 1:
        return (
            f"{name} needs stages_per_device = 1 (got {problem.stages_per_device}, placement "
            f"{problem.placement!r}); use interleaved-1f1b, zb-v or greedy"
        )
    return None


def needs_split_backward(name: str, problem: Problem) -> str | None:
    if not problem.split_backward:
        return f"{name} needs split_backward: true (it schedules B and W separately)"
    return None


def keep_microbatches(order: Order, microbatches: int) -> Order:
    """Drop the ops of microbatches ``>= microbatches`` from every device's order.

    Why this is safe: the ops of one microbatch depend only on ops of that same microbatch, so
    any execution of the full order restricted to the kept microbatches is an execution of the
    trimmed order. A recipe proven deadlock-free for ``M`` microbatches therefore stays
    deadlock-free for every ``m < M``; recipes with a minimum ``m`` build for ``M`` and trim.
    """
    return [[op for op in ops if op.microbatch < microbatches] for ops in order]


def backward(stage: int, microbatch: int, split: bool) -> list[OpId]:
    """B, then W right after it when the backward is split."""
    ops = [OpId("B", stage, microbatch)]
    if split:
        ops.append(OpId("W", stage, microbatch))
    return ops

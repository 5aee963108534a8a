"""Small pieces shared by the fixed recipes: their method records, applicability checks, microbatch trimming."""

from __future__ import annotations

from collections.abc import Callable

from ...budget import PER_OP
from ...core.instance import Instance, OpId
from ...core.method import Applies, Method, SolveOptions
from ...core.problem import Problem
from ...core.schedule import Order, Schedule
from ...timing.finalize import from_order


def recipe(name: str, summary: str, order: Callable[[Instance], Order], applies: Applies | None = None) -> Method:
    """The method record of a fixed recipe: its order, timed by the simulator and finalized
    (:func:`pipesched.solver.timing.finalize.from_order`, which refuses an order over the memory cap)."""

    def solve_recipe(problem: Problem, options: SolveOptions) -> Schedule:
        inst = Instance.from_problem(problem)
        return from_order(problem, name, order(inst), inst=inst)

    solve_recipe.__name__ = solve_recipe.__qualname__ = f"solve_{name.replace('-', '_')}"
    return Method(name, summary, "recipe", solve_recipe, requires=applies or (lambda _p: None),
                  cost_per_op=PER_OP.fixed_recipe)


def needs_single_stage_loop(name: str, problem: Problem) -> str | None:
    """Reason a v = 1 recipe does not apply (``None`` when it does)."""
    if problem.stages_per_device != 1:
        return (
            f"{name} needs stages_per_device = 1 (got {problem.stages_per_device}, placement "
            f"{problem.placement!r}); use interleaved-1f1b, zb-v or greedy"
        )
    return None


def needs_v_placement(name: str, problem: Problem) -> str | None:
    """Reason a V-shaped recipe (two chunks per device folded into a V) does not apply."""
    if problem.placement != "v":
        return f"{name} needs placement 'v' with stages_per_device = 2 (got {problem.placement!r})"
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

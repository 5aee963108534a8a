"""Warm starts: the valid orders the heuristics find, handed to ``cpsat``, ``ilp`` and ``auto``.

One path, so the three agree on what a warm start is and on what a heuristic may fail with:
the zero-bubble grid (:mod:`.zero_bubble`, sized for a nominal budget, never the clock), every
other heuristic of :mod:`.catalog` in name order (so the answer is deterministic), and a caller's hint
when its per-device order schedules this problem (a cached schedule of a neighbouring problem
often does). Each caller decides how many of them it can afford and how to time them.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..budget import (
    GRID_OPS_PER_SECOND,
    REFINE_POLICIES,
    RETIMED_ORDERS,
    grid_seconds,
    grid_share,
    setup_cost,
    size_class,
)
from ..core.instance import Instance
from ..core.method import SolveOptions
from ..core.metrics import peak_memory
from ..core.problem import Problem
from ..core.schedule import Order, Schedule
from ..core.tolerance import within_cap
from ..timing.finalize import finalize
from ..timing.retime import Incumbent
from ..timing.simulate import DeadlockError
from .catalog import SKIPPED, heuristic_schedules
from .search import Search
from .v_greedy import POLICIES as V_POLICIES
from .v_greedy import v_candidates
from .zb_policies import most_policies
from .zero_bubble import zb_candidates


def grid_starts(inst: Instance, seconds: float | None, deadline: float | None = None,
                keep: int | None = None) -> list[tuple[str, Incumbent]]:
    """The zero-bubble grid's orders, best first (the ``keep`` best), named ``zb-auto[k]``; under the
    dual placement, where the grid does not apply, :func:`dual_starts` instead."""
    if inst.dual:
        return dual_starts(inst)[:keep]
    cands = zb_candidates(inst, seconds, deadline, keep=keep)
    out = [(f"zb-auto[{k}]", c) for k, c in enumerate(cands)]
    count = None if seconds is None else int(seconds * GRID_OPS_PER_SECOND / max(1, inst.num_ops))
    if inst.placement == "v" and (count is None or count >= 1):  # the V greedy's orders too (issue 12):
        v_orders = v_candidates(inst, count=count)  # method zb-v-greedy is their best, so auto never loses to it
        out = sorted([(f"zb-v-greedy[{k}]", c) for k, c in enumerate(v_orders)] + out,
                     key=lambda nc: nc[1].objective)[:keep]
    return out


def dual_starts(inst: Instance) -> list[tuple[str, Incumbent]]:
    """The ``dualpipe`` recipe's order (when within ``memory.limit``) and greedy's best, best first: so an
    exact method warm-started from here is never worse than the recipe (issue 14)."""
    from .classic.dualpipe import dualpipe_order
    from .greedy import best_greedy_order

    out: list[tuple[str, Incumbent]] = []
    order = dualpipe_order(inst)
    if all(within_cap(peak, cap) for peak, cap in zip(peak_memory(inst, order), inst.limit, strict=True)):
        out.append(("dualpipe", Incumbent.of(inst, order)))
    with contextlib.suppress(*SKIPPED):
        out.append(("greedy", Incumbent.of(inst, best_greedy_order(inst)[1])))
    return sorted(out, key=lambda c: c[1].objective)


def recipe_orders(problem: Problem, options: SolveOptions,
                  afford: Callable[[], bool] = lambda: True) -> Iterator[tuple[str, Order]]:
    """Every heuristic that applies, in name order, while ``afford()`` (asked before each run)."""
    for name, schedule in heuristic_schedules(problem, options, afford=lambda _m: afford()):
        yield name, schedule.order()


def hint_start(inst: Instance, hint: Schedule | None) -> Incumbent | None:
    """The hint's order, timed for this problem, when it orders exactly this problem's ops (the
    simulator times any order it is given, so a hint of fewer microbatches must be refused here)."""
    if hint is None or not hint.ops or {o.id for o in hint.ops} != set(inst.ops()):
        return None
    with contextlib.suppress(DeadlockError, KeyError, ValueError):
        return Incumbent.of(inst, hint.order())
    return None


def first_schedule(problem: Problem, inst: Instance, method: str, seconds: float, t0: float) -> Schedule | None:
    """The answer for a limit below the set-up cost (:func:`pipesched.solver.budget.setup_cost`): the
    first valid order of the cheapest heuristics, the grid's first policy, then the other heuristics
    in name order, finalized at once with a reason that says so; None when none finds an order.
    Deterministic: it depends on the problem and the nominal ``seconds`` only."""
    found: tuple[str, Incumbent] | None = next(iter(grid_starts(inst, 0.0, keep=1)), None)
    if found is None:
        found = next(((name, Incumbent.of(inst, order)) for name, order in recipe_orders(
            problem, SolveOptions(time_limit_s=seconds, workers=1))), None)
    if found is None:
        return None
    name, inc = found
    note = (f"time limit {seconds:g} s is below the estimated {setup_cost(inst):.3g} s set-up of "
            f"{inst.num_ops} ops: the first heuristic schedule ({name}), without search (docs/limits.md)")
    return finalize(problem, method, inc.start, solve_time_s=time.perf_counter() - t0, inst=inst, note=note)


def grid_most(inst: Instance) -> float:
    """The most the grid is charged however large the limit: what its largest run costs at its class's rate
    (every policy the size allows, the scale search's, and the V greedy's on V). Why: a 60 s limit
    charged the grid its whole share, 30 s, for the 4 s it ran, and left the phases after it that much
    less of the limit to use."""
    if inst.dual:
        return math.inf  # the dual starts are not the grid's policies
    v_greedy = len(V_POLICIES) + 1 if inst.placement == "v" and inst.stages_per_device == 2 else 0
    runs = most_policies(inst) + REFINE_POLICIES + v_greedy
    return runs * inst.num_ops / size_class(inst).grid_ops_per_second


@dataclass(frozen=True)
class GridPhase:
    """The zero-bubble grid's orders (and the V greedy's; DualPipe's and greedy's under "dual"), sized for
    ``seconds(inst, limit)`` nominal seconds and charged ``charge(inst, limit)``, at most ``most(inst)``
    (what its largest run costs); it stops itself at the
    search's wall net. When its best meets the bound, the heuristics after it are skipped.

    ``room`` is the most the phases after it let it take (the recipes' :meth:`room_before`: what leaves
    the searches their estimates when not every recipe runs anyway): the grid, which only adds orders
    with more time where a search runs once or not at all, shrinks to it."""

    seconds: Callable[[Instance, float], float] = grid_seconds
    charge: Callable[[Instance, float], float] = lambda inst, limit: grid_share(inst) * limit
    most: Callable[[Instance], float] = grid_most
    keep: int = RETIMED_ORDERS
    room: Callable[[Search], float] = lambda s: math.inf
    name: str = "zero-bubble grid"
    wall_net: bool = False

    def applies(self, s: Search) -> bool:
        return True

    def estimate(self, s: Search) -> float:
        return 0.0  # always runs: the first valid order is kept however short the limit

    def allowance(self, s: Search) -> float:
        return self.part(s) * self.seconds(s.inst, s.limit)

    def part(self, s: Search) -> float:
        """The part of its nominal share the grid takes: all of it, or what :attr:`room` allows."""
        full = self.charge(s.inst, s.limit)
        return 1.0 if full <= 0.0 else min(1.0, self.room(s) / full)

    def run(self, s: Search) -> None:
        part = self.part(s)
        found = grid_starts(s.inst, part * self.seconds(s.inst, s.limit), deadline=s.stop, keep=self.keep)
        s.budget.charge(min(part * self.charge(s.inst, s.limit), self.most(s.inst)))
        s.keep(found)
        if found and s.meets_bound(min(c.objective for _, c in found)):
            s.closed = True


@dataclass(frozen=True)
class HintPhase:
    """The caller's hint (a cached schedule, a neighbour's), when it orders exactly this problem's ops."""

    name: str = "hint"
    wall_net: bool = False

    def applies(self, s: Search) -> bool:
        return s.options.hint is not None and not s.closed

    def estimate(self, s: Search) -> float:
        return 0.0

    def allowance(self, s: Search) -> float:
        return 0.0

    def run(self, s: Search) -> None:
        if (h := hint_start(s.inst, s.options.hint)) is not None:
            s.keep([("hint", h)])

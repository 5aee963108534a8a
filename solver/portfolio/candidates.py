"""The portfolio's heuristic candidates: the zero-bubble grid, every applicable recipe, the hint.

Why recipes are always kept (issue 12): ``auto`` must never be worse than a method it contains.
The old rule charged every recipe ``RECIPE_S_PER_OP`` (the greedy list scheduler's cost) after the
grid's whole share, in name order; at p = 16, m = 32, V placement (3072 ops) and a 10 s limit that
left room for one recipe, so ``greedy`` and ``zb-v`` never ran and ``auto`` returned a schedule
3.5% worse than ``greedy`` and 1.6% worse than ``zb-v`` (measured on the case of
``benchmarks/anchors.py``). Now:

- each heuristic is charged its record's :attr:`~pipesched.solver.core.method.Method.cost_per_op`: a fixed
  recipe (role ``recipe``, a closed-form order) one simulation and validation,
  :data:`~pipesched.solver.budget.FIXED_RECIPE_S_PER_OP`; a search ``RECIPE_S_PER_OP``;
- when all of them together fit ``HEURISTIC_SHARE`` of the nominal limit they all run, whatever the
  grid took (the clock only skips one that would end past the method's deadline, and says so) (their estimated cost is then charged to the plan,
  :attr:`Candidates.spent`, so the later phases plan with what is really left); otherwise (very
  large problems or tiny limits) the cheapest run first while they fit the share the grid left,
  with the clock as the safety net (``stop``) once some order was found.
The interleaved memory greedy (:mod:`pipesched.solver.heuristics.interleaved_memory`, loop placement,
v >= 2: orders that beat torch's InterleavedZeroBubble under its own peak as the cap, issue 12 target 3)
runs after the recipes when its estimated cost still fits ``HEURISTIC_SHARE``, so no later phase
loses time to it. The V tight-cap orders (:mod:`pipesched.solver.heuristics.v_memory`, method ``v-memory``:
below torch's ZBV order at a cap of 1p, where nothing else was, issue 12 target 2) run with the method's own
search budget (a count of trials) at every size, unless they would end past the method's wall deadline
(reported), so ``auto`` is never worse than ``v-memory``. Every other decision reads estimates and the nominal limit, never the clock, so the answer repeats.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..budget import (
    FULL_MODEL_OPS,
    HEURISTIC_SHARE,
    INTERLEAVED_MEMORY_S_PER_OP,
    INTERLEAVED_SEARCH_SHARE,
    INTERLEAVED_TRIAL_S_PER_OP,
    RETIMED_ORDERS,
    TRIAL_S_PER_OP,
    V_MEMORY_S_PER_OP,
    V_WIDE_S_PER_OP,
    grid_seconds,
    grid_share,
    heuristic_share,
    note_wall_cut,
)
from ..core.instance import Instance
from ..core.method import Method, SolveOptions
from ..core.problem import Problem
from ..core.tolerance import slack
from ..heuristics.catalog import applicable, heuristic_schedules
from ..heuristics.interleaved_memory import POLICIES as IL_POLICIES
from ..heuristics.interleaved_memory import applies as il_applies
from ..heuristics.interleaved_memory import interleaved_candidates
from ..heuristics.trials import Trials
from ..heuristics.v_greedy import V_GREEDY
from ..heuristics.v_memory import POLICIES as VM_POLICIES
from ..heuristics.v_memory import V_MEMORY, search_trials, vm_candidates, wide_count
from ..heuristics.v_memory import applies as vm_applies
from ..heuristics.warm_start import grid_starts, hint_start
from ..timing.retime import Incumbent

#: Heuristics whose orders another phase already holds, so they are not run again as recipes: the grid
#: (:func:`~pipesched.solver.heuristics.warm_start.grid_starts`) holds the V greedy's, and the V tight-cap
#: orders run in a block of their own below, charged their measured cost.
COVERED: tuple[Method, ...] = (V_GREEDY, V_MEMORY)


@dataclass
class Candidates:
    """The named valid orders found, and the nominal seconds their search was charged."""

    found: list[tuple[str, Incumbent]]
    spent: float


def applicable_recipes(problem: Problem, num_ops: int) -> list[tuple[float, Method]]:
    """(estimated cost, method) of every heuristic that applies and no other phase covers, cheapest
    first, ties by name."""
    found = applicable(problem, exclude=[m.name for m in COVERED])
    return sorted(((m.cost_per_op * num_ops, m) for m in found), key=lambda cm: (cm[0], cm[1].name))


def _run(problem: Problem, inst: Instance, options: SolveOptions, method: Method) -> list[tuple[str, Incumbent]]:
    """The heuristic's valid order, when it fits the problem."""
    return [(name, Incumbent.of(inst, schedule.order()))
            for name, schedule in heuristic_schedules(problem, options, [method])]


def heuristic_incumbents(problem: Problem, inst: Instance, options: SolveOptions,
                         stop: float = float("inf"), bound: float = 0.0,
                         deadline: float = float("inf")) -> Candidates:
    """The grid (sized for :func:`~pipesched.solver.budget.grid_share` of the nominal limit), then the recipes (see the module
    docstring; skipped when the grid already meets ``bound``), then the hint. ``stop`` is the heuristics'
    wall net, ``deadline`` the method's: a recipe that would end past it is skipped and reported."""
    limit = options.time_limit_s
    out = grid_starts(inst, grid_seconds(inst, limit), deadline=stop, keep=RETIMED_ORDERS)
    spent = grid_share(inst) * limit
    if out and min(c.objective for _, c in out) - bound <= slack(bound):
        return Candidates(out, HEURISTIC_SHARE * limit)
    recipes = applicable_recipes(problem, inst.num_ops)
    # up to FULL_MODEL_OPS the recipes together cost a second or two at most and auto's promise never to
    # be worse than one of them wins over the clock; above, one recipe costs seconds and the deadline wins
    large = inst.num_ops > FULL_MODEL_OPS
    total = sum(c for c, _ in recipes)
    if total <= HEURISTIC_SHARE * limit:  # all of them: auto is never worse than one ...
        spent += total
        for cost, m in recipes:  # ... unless the method's wall deadline would pass (then it says so)
            if out and large and time.perf_counter() + cost > deadline:
                note_wall_cut("recipes")
                continue
            out = _best(out + _run(problem, inst, options, m))
    else:  # cheapest first while they fit what the grid left of the share; the clock is the net. A fixed
        # recipe (one simulation) always runs unless it would end past the method's deadline: above
        # FULL_MODEL_OPS the grid is charged its whole nominal share, and skipping the recipes by that
        # estimate alone left auto up to 27% worse than interleaved-zb on loop v = 4 problems of 12k ops
        # while it ended after 1.9 s of a 10 s limit (benchmarks/results/heldout.md, before this change).
        for cost, m in recipes:
            fixed = m.role == "recipe"
            if out and not fixed and spent + cost > heuristic_share(inst) * limit:
                continue
            if out and time.perf_counter() + cost > (deadline if fixed else stop):
                note_wall_cut("recipes")
                continue
            spent += cost
            out = _best(out + _run(problem, inst, options, m))
    out, spent = _interleaved(inst, out, spent, limit, stop, deadline)
    out, spent = _v_memory(inst, out, spent, limit, deadline)
    if (h := hint_start(inst, options.hint)) is not None:
        out = _best([*out, ("hint", h)])
    return Candidates(out, max(spent, HEURISTIC_SHARE * limit))


def _interleaved(inst: Instance, out: list[tuple[str, Incumbent]], spent: float, limit: float,
                 stop: float, deadline: float) -> tuple[list[tuple[str, Incumbent]], float]:
    """The interleaved memory greedy and its order search (loop placement, v >= 2, tight caps), with a
    share of their own beside the heuristics' (``INTERLEAVED_SEARCH_SHARE``): the search is where these
    problems improve (CP-SAT on their capped models rarely does). The greedy runs when its estimate fits
    both shares after what the other heuristics were charged; the search gets a count of trials (so the
    answer repeats) from what is left of them, at most its own share, up to ``FULL_MODEL_OPS``, and is
    charged the trials it used, so a problem that converges at once leaves the exact phases their time."""
    if not il_applies(inst):
        return out, spent
    il_cost = INTERLEAVED_MEMORY_S_PER_OP * inst.num_ops * len(IL_POLICIES)
    room = (HEURISTIC_SHARE + INTERLEAVED_SEARCH_SHARE) * limit - spent - il_cost
    if room < 0:
        return out, spent
    net = min(deadline, stop + INTERLEAVED_SEARCH_SHARE * limit)  # the heuristics' wall net, plus this share
    if time.perf_counter() + il_cost > net:
        note_wall_cut("interleaved memory greedy")
        return out, spent
    per_trial = INTERLEAVED_TRIAL_S_PER_OP * inst.num_ops
    searched = inst.num_ops <= FULL_MODEL_OPS
    trials = Trials(int(min(room, INTERLEAVED_SEARCH_SHARE * limit) / per_trial), net) if searched else None
    allowed = trials.left if trials is not None else 0
    found = interleaved_candidates(inst, keep=RETIMED_ORDERS, trials=trials if allowed else None)
    if trials is not None and trials.cut:
        note_wall_cut("interleaved order search")
    spent += il_cost + (allowed - trials.left if trials is not None else 0) * per_trial
    return _best(out + [(f"interleaved-memory[{k}]", c) for k, c in enumerate(found)]), spent


def _v_memory(inst: Instance, out: list[tuple[str, Incumbent]], spent: float, limit: float,
              deadline: float) -> tuple[list[tuple[str, Incumbent]], float]:
    """The V tight-cap orders (:mod:`pipesched.solver.heuristics.v_memory`) with the method's own search
    budget, so ``auto`` is never worse than ``v-memory``. They run at every size unless their estimate
    would end past the method's ``deadline`` (then reported as a wall cut), as a fixed recipe does:
    gating them by the share above ``FULL_MODEL_OPS`` (the grid alone is charged more than the share
    there) left ``auto`` 3.6% worse than ``v-memory`` on a held-out V case of 7200 ops while it ended
    after 4.6 s of a 10 s limit (1.5B p24 m50 v2 1.14p, ``benchmarks/heldout.py``)."""
    if not vm_applies(inst):
        return out, spent
    trials = search_trials(inst, limit)
    cost = inst.num_ops * (V_MEMORY_S_PER_OP * (len(VM_POLICIES) + 2)  # + ZB-V, deferred W
                           + V_WIDE_S_PER_OP * wide_count(trials) + 2 * TRIAL_S_PER_OP * trials)  # 2 x 2 searches
    if inst.num_ops > FULL_MODEL_OPS and time.perf_counter() + cost > deadline:
        note_wall_cut("V memory orders")
        return out, spent
    found = vm_candidates(inst, keep=RETIMED_ORDERS, trials=trials, deadline=deadline)
    return _best(out + [(f"v-memory[{k}]", c) for k, c in enumerate(found)]), spent + cost


def _best(cands: list[tuple[str, Incumbent]]) -> list[tuple[str, Incumbent]]:
    """The orders ``auto`` goes on with (the best first; ties keep the order found): holding every
    candidate of a 98k-op problem cost hundreds of MB (:data:`~pipesched.solver.budget.RETIMED_ORDERS`)."""
    return sorted(cands, key=lambda nc: nc[1].objective)[:RETIMED_ORDERS]

"""Memory-aware greedy list scheduler: any placement, split or fused backward, per-stage costs,
comm and ``memory.limit``. It is the warm start of the exact solvers.

Time moves forward device by device (a list schedule): whenever a device is free it runs the
best op whose inputs have arrived and that memory allows, by a priority rule (the ``policy``);
each op gets the earliest start its device order allows, exactly what :func:`simulate` gives.
Memory is checked twice:

* the cap itself: live memory after a positive delta stays within ``memory.limit``;
* deadlock avoidance, a banker's test: an op of microbatch ``j`` on device ``k`` may only take
  memory that leaves every older in-flight microbatch ``t < j`` able to finish alone, i.e. for each
  such ``t``: ``held_k(u >= t) + need_k(t) <= limit_k``, where ``need_k(t)`` is the sum of the
  positive deltas ``t`` still has to apply on ``k``. Microbatches enter the pipeline in index
  order, so the oldest unfinished one can always move and the list never stalls, provided one
  microbatch alone fits (``need_k <= limit_k``; otherwise :class:`NotApplicableError` says where).

Policies (the exact solver takes the best of them, :data:`POLICIES`):

* ``default``: B, then F, then W: Bs are on the critical path, Fs fill the pipeline as far as
  memory allows, Ws fill gaps and run when memory is needed;
* ``eager-w``: B, then W, then F: frees memory as soon as possible (1F1B behaviour);
* ``patient``: like ``default`` but a device waits for a B that arrives before a lower-priority
  op it could start now would end;
* ``alternate``: F after B and B after F when both can run, W otherwise (1F1B's steady state, which
  keeps the next device fed while backwards drain; under a limit of p it rebuilds ZB-H1);
* ``follow-lean`` and ``follow-wide``: run a recipe's per-device order (the lean one: ZB-H1, 1F1B
  when fused, interleaved 1F1B, ZB-V, DualPipe-V when fused; the wide one: ZB-H2, DualPipe-V on
  the V placement; DualPipe on the dual placement), waiting for its next op as the recipe does; when memory forbids that op, run the earliest later op that fits instead. Within the
  recipe's own peak this is the recipe; under a tighter limit it is the recipe bent to fit (and
  if strict waiting ever leaves every device idle, the rest is scheduled without waiting);
* ``headroom`` and ``alternate-headroom``: as ``default`` / ``alternate``, but a microbatch new to
  a device may not take the memory an older one needs for its next forward there (with v >= 2 or
  the V placement this keeps later-chunk forwards flowing instead of filling memory with new
  microbatches).

Ties go to the oldest microbatch. Cost: O(ops log ops) plus, under a finite limit, a scan of the
device's in-flight microbatches per memory-increasing op.
"""

from __future__ import annotations

import time

from ..budget import PER_OP
from ..core.errors import NotApplicableError
from ..core.instance import Instance, OpId
from ..core.method import Method, SolveOptions
from ..core.metrics import makespan, objective_value
from ..core.problem import Problem
from ..core.schedule import Order, Schedule
from ..timing.finalize import finalize, infeasible
from ..timing.retime import compact
from .listsched.engine import run_planned
from .listsched.greedy_rules import GreedyRun
from .listsched.policies import GREEDY as GREEDY_SET
from .listsched.policies import GreedyPolicy

#: The policies by name (:data:`~.listsched.policies.GREEDY` holds them with their provenance).
POLICIES: dict[str, GreedyPolicy] = {pol.name: pol for pol in GREEDY_SET.policies}


def reference_recipe(inst: Instance, family: str) -> str:
    """The recipe a ``follow-*`` policy adapts: the leanest in memory, or one that holds more."""
    if inst.dual:
        return "dualpipe"
    if inst.placement == "v":
        return "zb-v" if inst.split_backward and family == "lean" else "dualpipe-v"
    if inst.stages_per_device > 1:
        return "interleaved-1f1b"
    if not inst.split_backward:
        return "1f1b"
    return "zb-h1" if family == "lean" else "zb-h2"


def _reference_order(inst: Instance, recipe: str) -> Order:
    from .classic.dualpipe import dualpipe_order
    from .classic.dualpipe_v import dualpipe_v_order
    from .classic.interleaved import interleaved_order
    from .classic.one_f_one_b import one_f_one_b_order
    from .classic.zb_h import zb_h1_order, zb_h2_order
    from .classic.zb_v import zb_v_order

    build = {"zb-v": zb_v_order, "dualpipe-v": dualpipe_v_order, "dualpipe": dualpipe_order, "interleaved-1f1b": interleaved_order,
             "1f1b": one_f_one_b_order, "zb-h1": zb_h1_order, "zb-h2": zb_h2_order}
    return build[recipe](inst)


def greedy_order(inst: Instance, *, policy: str = "default") -> Order:
    """A per-device op order built by list scheduling under ``policy`` (see :data:`POLICIES`).

    Respects ``memory.limit`` for any placement; raises :class:`NotApplicableError` when a
    single microbatch cannot fit on some device.
    """
    return greedy_schedule(inst, policy=policy)[0]


def greedy_schedule(inst: Instance, *, policy: str = "default") -> tuple[Order, dict[OpId, float]]:
    """:func:`greedy_order` and the start times it ran with (exactly what :func:`simulate` gives)."""
    try:
        rule = POLICIES[policy]
    except KeyError:
        raise NotApplicableError(f"unknown greedy policy {policy!r}; choose one of: {', '.join(POLICIES)}") from None
    reference = _reference_order(inst, reference_recipe(inst, rule.follow)) if rule.follow else None
    state = GreedyRun(inst, rule, reference)
    done = run_planned(inst.devices, state.look, state.start, state.first)
    if done < inst.num_ops and rule.follow:  # strict following stalled: finish without waiting for the recipe
        done += run_planned(inst.devices, state.look, state.start, state.relax())
    if done != inst.num_ops:  # cannot happen when the banker's test holds; kept as a guard
        raise NotApplicableError(f"greedy ({policy}) stalled after {done} of {inst.num_ops} ops under memory.limit")
    return state.order, state.times


def best_greedy_order(inst: Instance) -> tuple[str, Order]:
    """The policy whose order scores best on the problem's objective (then makespan), and its order."""
    name, order, _ = _best(inst)
    return name, order


def _best(inst: Instance) -> tuple[str, Order, dict[OpId, float]]:
    best: tuple[tuple[float, float], str, Order, dict[OpId, float]] | None = None
    followed: set[str] = set()
    for name, rule in POLICIES.items():
        if rule.follow:  # two families may adapt the same recipe: run it once
            recipe = reference_recipe(inst, rule.follow)
            if recipe in followed:
                continue
            followed.add(recipe)
        order, start = greedy_schedule(inst, policy=name)
        if inst.objective == "stage_span":
            start = compact(inst, order)
        score = (objective_value(inst, start), makespan(inst, start))
        if best is None or score < best[0]:
            best = (score, name, order, start)
    assert best is not None
    return best[1], best[2], best[3]


def solve_greedy(problem: Problem, options: SolveOptions) -> Schedule:
    t0 = time.perf_counter()
    inst = Instance.from_problem(problem)
    if (answer := infeasible(problem, "greedy", inst, t0)) is not None:  # a cap nothing fits: say so, as cpsat does
        return answer
    _, _, start = _best(inst)
    return finalize(problem, "greedy", start, inst=inst)


GREEDY = Method(
    "greedy",
    "Greedy list scheduler: respects memory.limit without deadlock (banker's test); any placement, "
    "split or fused; best of several priority rules.",
    "search", solve_greedy, cost_per_op=PER_OP.recipe,
)

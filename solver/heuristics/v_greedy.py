"""A memory-aware greedy for the V placement, after the ZB-V paper's idea (Qi et al., "Pipeline
Parallelism with Controllable Memory", NeurIPS 2024, section 4: V-Min / V-Half / V-ZB).

Device ``d`` holds chunk 0 = stage ``s = d`` and chunk 1 = stage ``t = 2p - 1 - d``. The paper builds
V schedules from a warm-up whose length each device's memory budget sets, then a steady phase in
which F and B alternate and W fills what would be bubbles; the memory setting (V-Min, V-Half,
V-ZB) decides how many microbatches are in flight. Here, time moves forward over all devices at
once (the device whose next decision comes first decides; every arrival before it is known):

1. warm-up: chunk-0 forwards until the first chunk-1 forward arrives, at most ``warm[d]`` of them
   (the ZB-V recipe's ``2(p - d) - 1`` scaled by the policy), always leaving room for a chunk-1
   forward, so the turn of the V can never be starved of memory;
2. steady: a ready B first (it frees memory and feeds the device above), then a ready F, chunk 1
   before chunk 0 (it brings a microbatch to its turn); a new chunk-0 microbatch is admitted only
   while fewer than ``steady[d]`` are in flight on chunk 0: the memory this saves is what lets W wait;
3. W waits: it runs when the device would otherwise idle (and, under ``fits``, only when it ends
   before the next known arrival), or when memory stops a ready forward. Deferred Ws fill the
   cool-down, where the round trip of the last microbatches leaves every device waiting.

:func:`v_candidates` runs a small grid of policies (:data:`POLICIES`, chosen on the V tuning set by
``benchmarks/tune_list_policies.py``: rank, W rule, warm-up; lower in-flight caps, the V-Half / V-Min
idea, are a knob of :class:`VPolicy` the rule did not choose), plus ZB-V's own order when it fits, and
keeps the best orders; method
``zb-v-greedy`` returns the best one. The portfolio's grid phase holds the same orders
(:func:`~pipesched.solver.heuristics.warm_start.grid_starts`), so ``auto`` starts from them, polishes
the best with the W local search (:mod:`.swap_past_w`), and is never worse than the method. Every
order is checked for memory by the validator on the way out.
"""

from __future__ import annotations

import math

from ..budget import PER_OP
from ..core.instance import Instance
from ..core.method import Method
from ..core.metrics import makespan, objective_value, peak_memory
from ..core.problem import Problem
from ..core.schedule import Order
from ..core.tolerance import within_cap
from ..timing.finalize import best_candidate_solver
from ..timing.retime import Incumbent, compact
from ..timing.simulate import DeadlockError
from .classic.zb_v import zb_v_order
from .listsched.engine import Progress, run
from .listsched.policies import V, VPolicy
from .listsched.rules import oldest_w, ramp_caps, room_for_turn, v_choose


def v_order(inst: Instance, policy: VPolicy) -> Order:
    """Per-device order under ``policy`` (module docstring); raises DeadlockError if it gets stuck."""
    p, S = inst.devices, inst.num_stages
    base = [2 * (p - d) - 1 for d in range(p)]
    warm = ramp_caps(base, policy.warm, policy.extra)
    steady = ramp_caps(base, policy.steady, policy.extra) if policy.steady is not None else [math.inf] * p
    prog = Progress(inst, bank=False)
    nf = prog.nf
    waiting = oldest_w(prog, lambda d: (S - 1 - d, d), lambda o: (o.microbatch, o.stage))
    choose = v_choose(prog, lambda d: steady[d] if nf[S - 1 - d] else warm[d], room_for_turn(prog), policy.rank,
                      waiting, policy.w)
    total, done = len(inst.kinds) * S * inst.microbatches, run(p, prog.free, choose, prog.commit)
    if done != total:
        raise DeadlockError(f"V greedy {policy} stuck after {done} of {total} ops")
    return prog.order


#: The grid, best first: :data:`~.listsched.policies.V` (the cases and the rule that chose it are there).
POLICIES: tuple[VPolicy, ...] = V.policies


def v_candidates(inst: Instance, keep: int = 3, count: int | None = None) -> list[Incumbent]:
    """The ``keep`` best orders of the grid's first ``count`` entries (all when None), by objective,
    then makespan, then grid position.

    The ZB-V recipe's own order is the last entry of the grid when it fits the cap: at a cap of
    1p (ZB-V's own peak) memory leaves W no room to wait, and ZB-V's fixed B-W pairs are the better
    start for the local search there (``benchmarks/v_placement.py``: the greedy is 1-3% behind it)."""
    if inst.placement != "v" or inst.stages_per_device != 2:
        return []
    out = []
    for k, pol in enumerate((*POLICIES, None)[:count]):
        try:
            order = v_order(inst, pol) if pol is not None else _zb_v_within_cap(inst)
        except DeadlockError:
            continue
        if order is None:
            continue
        start = compact(inst, order)
        value = objective_value(inst, start)
        out.append((value, makespan(inst, start), k, Incumbent(order, start, value)))
    out.sort(key=lambda c: c[:3])
    return [c[3] for c in out[:keep]]


def _zb_v_within_cap(inst: Instance) -> Order | None:
    """ZB-V's order (split backward only) when its peak fits every device's cap, else None."""
    if not inst.split_backward:
        return None
    order = zb_v_order(inst)
    caps = zip(peak_memory(inst, order), inst.limit, strict=True)
    return order if all(within_cap(peak, cap) for peak, cap in caps) else None


def _applies(problem: Problem) -> str | None:
    if problem.placement != "v":
        return f"zb-v-greedy needs placement 'v' with stages_per_device = 2 (got {problem.placement!r})"
    return None


solve_v_greedy = best_candidate_solver("zb-v-greedy", lambda inst: v_candidates(inst, keep=1))


V_GREEDY = Method("zb-v-greedy", "Memory-aware V greedy (ZB-V paper's idea: warm-up set by memory, deferred W fills "
                  "the cool-down); respects memory.limit; needs placement 'v'.",
                  "search", solve_v_greedy, requires=_applies, cost_per_op=PER_OP.recipe)

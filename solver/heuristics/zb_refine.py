"""A pattern search on the warm-up scale of the zero-bubble grid's best policy.

The grid (:mod:`.zb_policies`) tries fixed warm-up scales (1.5, 1.9, 2.0, 2.25, ...), chosen on the
tuning set. Between two of them lies a whole range of in-flight caps ``ceil(scale * (S - s)) + extra``:
on deep pipelines a few hundredths of scale move the caps of the early stages, and with them the
bubble. Rather than tune more fixed values, this searches that range on the problem at hand, from
the best grid policy: try ``scale ± step``, move on improvement, halve the step when neither side
improves. It only adds candidates (the grid's orders stay), and it runs a counted number of
policies (:data:`~pipesched.solver.budget.REFINE_POLICIES`, within what the nominal budget still
affords after the grid), so it is deterministic and can only improve the heuristic's answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..core.instance import Instance
from ..core.schedule import Order
from ..timing.retime import Incumbent, compact, order_score
from ..timing.simulate import DeadlockError
from .zb_policies import Policy

#: Scale steps, coarse to fine: from the grid's spacing (about 0.1) down to where ``ceil(scale * k)``
#: stops changing for the depths the service accepts. A search rule, not a tuned value.
STEPS = (0.08, 0.04, 0.02, 0.01)
#: Smallest scale tried: below it the warm-up is shorter than 1F1B's on most stages.
MIN_SCALE = 0.5

Scored = tuple[float, float, Incumbent]


def refine_scale(inst: Instance, best: Policy, best_score: tuple[float, float], trials: int,
                 order_of: Callable[[Instance, Policy], Order]) -> list[Scored]:
    """Up to ``trials`` new orders around ``best`` (whose (value, span) is ``best_score``), changing the
    scale only, each as (value, span, incumbent) in the order tried. A policy with ``extra=None``
    (memory alone caps it) has no scale to refine."""
    if best.extra is None or trials <= 0:
        return []
    tried = {round(best.scale, 6)}
    found: list[Scored] = []
    centre, centre_score = best, best_score
    for step in STEPS:
        moved = True
        while moved and len(found) < trials:
            moved = False
            for sign in (1, -1):
                scale = round(centre.scale + sign * step, 6)
                if scale < MIN_SCALE or scale in tried or len(found) >= trials:
                    continue
                tried.add(scale)
                policy = dataclasses.replace(centre, scale=scale)
                try:
                    order = order_of(inst, policy)
                except DeadlockError:
                    continue
                start = compact(inst, order)
                score = order_score(inst, order, start)
                found.append((*score, Incumbent(order, start, score[0])))
                if score < centre_score:
                    centre, centre_score, moved = policy, score, True
                    break
    return found

"""The grid of warm-up policies the zero-bubble heuristic tries (issue 16: chosen apart from it).

The paper's automatic scheduler tries several warm-up sizes and keeps the best order; which sizes
to try is a tuned choice: the grid's head is the named set :data:`~.listsched.policies.ZB_HEAD`, whose
record names the command that chose it (``python benchmarks/tune_zb_policies.py``, tuning set of
``benchmarks/cases.py`` only); the rest is the enumeration below, cut by the budget. :mod:`.zero_bubble`
only runs the policies it is given.
"""

from __future__ import annotations

from ..budget import GRID_MAX_POLICIES, GRID_OPS_PER_SECOND, GRID_WORK
from ..core.instance import Instance
from .listsched.policies import ZB_HEAD, Policy

#: The head of the grid: :data:`~.listsched.policies.ZB_HEAD` (its rule, gains and provenance are there).
HEAD: tuple[Policy, ...] = ZB_HEAD.policies


def most_policies(inst: Instance, head: tuple[Policy, ...] = HEAD) -> int:
    """How many policies :func:`policies` returns however large the budget: the cut by size alone."""
    return min(GRID_MAX_POLICIES, max(len(head), GRID_WORK // max(1, inst.num_ops)))


def policies(inst: Instance, seconds: float | None = None, head: tuple[Policy, ...] = HEAD) -> list[Policy]:
    """The grid, most useful first: ``head`` (:data:`HEAD`; a tuning run passes others), then warm-up
    scales and extras 0, 1, 2, 4, ... up to 2S and unlimited, both W rules, both priorities;
    truncated to ``GRID_WORK / ops`` entries (at least the head) so that it stays fast (and
    deterministic: the cut depends on the problem size and the nominal budget ``seconds`` only,
    never on a clock); at least one policy is always kept."""
    extras: list[int | None] = [0, 1, 2]
    x = 4
    while x <= 2 * inst.num_stages:
        extras.append(x)
        x *= 2
    extras.append(None)
    scaled = [Policy(e, w, scale=a) for w in ("eager", "fits") for a in (2.0, 2.25, 1.9, 1.5, 2.5, 3.0)
              for e in (-2, -1, 0, 1)]
    rest = [Policy(e, w, f, b) for b in (False, True) for f in (False, True) for w in ("fits", "eager")
            for e in extras]
    plain = [Policy(e, w, f) for f in (True, False) for w in ("fits", "eager") for e in extras]
    grid = list(dict.fromkeys([*head, *plain, *scaled, *rest]))
    ops = inst.num_ops
    size = most_policies(inst, head)
    if seconds is not None:
        size = min(size, int(seconds * GRID_OPS_PER_SECOND / max(1, ops)))
    return grid[: max(1, size)]

"""The grid of warm-up policies the zero-bubble heuristic tries (issue 16: chosen apart from it).

The paper's automatic scheduler tries several warm-up sizes and keeps the best order; which sizes
to try is a tuned choice, so it lives here, next to the rule that chose it
(``python benchmarks/tune_zb_policies.py``, tuning set of ``benchmarks/cases.py`` only), and
:mod:`.zero_bubble` only runs the policies it is given.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..budget import GRID_MAX_POLICIES, GRID_OPS_PER_SECOND, GRID_WORK
from ..core.instance import Instance


@dataclass(frozen=True)
class Policy:
    """One point of the heuristic's grid.

    ``extra``: forwards a stage may have in flight beyond the 1F1B count (``S - s``); None lets
    only memory cap them. ``w``: "eager" runs W whenever nothing else is ready; "fits" only when
    the next known arrival is at least a W away (the paper's bubble filling). ``f_first``: prefer
    a ready F over a ready B while the stage is under its in-flight cap (ZB-H2-like warm-up).
    ``b_wait``: keep the device free for a B that is already on its way (it shortens the round
    trip every upstream stage waits on).
    """

    extra: int | None = 0
    w: str = "fits"
    f_first: bool = False
    b_wait: bool = False  # do not start an F (or W) when a known B would arrive before it ends
    scale: float = 1.0  # in-flight cap is ceil(scale * (S - s)) + extra: more warm-up on early stages


#: The head, chosen on the TUNING set of ``benchmarks/cases.py`` only by
#: ``python benchmarks/tune_zb_policies.py`` (rule, revisions and tables in
#: ``benchmarks/results/tune_zb_policies.md``): first the policy with the least worst-case excess
#: when it runs alone (it does on large problems), then greedy on the mean excess until a policy gains
#: under 0.02 points (here every third policy would raise the mean). Each comment gives the policy's gain on the
#: HELD-OUT set: how much the mean excess over the best-known value drops when it joins the grid after
#: the ones above it, averaged over auto's 1, 10 and 60 s cuts. Since issue 16's deep tuning cases
#: (p = 32) the rule keeps an eager policy with a long warm-up for deep pipelines; the rest of the old
#: hand-picked head (2.06, 2.03, ... tried on the zero-bubble paper cases) is gone.
HEAD: tuple[Policy, ...] = (
    # the 1F1B warm-up count plus one, bubble filling: the least worst case alone on the tuning set (the
    # best of the pool); held-out gain -0.047 points as a grid member (it displaces a tail policy)
    Policy(1, "fits"),
    # about 2.15x the 1F1B warm-up less two, eager W (the long round trip of deep pipelines under a
    # 2p-like cap): held-out gain 0.372 points
    Policy(-2, "eager", scale=2.15),
)


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
    size = min(GRID_MAX_POLICIES, max(len(head), GRID_WORK // max(1, ops)))
    if seconds is not None:
        size = min(size, int(seconds * GRID_OPS_PER_SECOND / max(1, ops)))
    return grid[: max(1, size)]

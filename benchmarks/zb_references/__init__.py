"""The zero-bubble authors' schedule generators, rewritten as independent references.

Each module re-implements one published construction from its algorithm (read in
sail-sg/zero-bubble-pipeline-parallelism; no code copied) on the public Problem, and times its orders
the way ``benchmarks/torch_orders.py`` times torch's: ``zb_auto`` is the automatic ZB-1p / ZB-2p
heuristic (loop placement, v = 1), ``zbv`` the memory-aware ZB-V generator of tag zero-bubble-v0.1.0
(V placement), ``v_auto`` their later V auto-schedule (building blocks repeated, squeezed and
reordered; V placement). None imports the solver's heuristics, so ``auto`` is measured against code
it does not share.
"""

from __future__ import annotations

from pipesched.solver import Problem

from . import v_auto, zb_auto, zbv
from .common import Timed

NAMES = (zb_auto.NAME, zbv.NAME, v_auto.NAME)


def references(problem: Problem) -> list[Timed]:
    """Every authors' reference that applies to ``problem`` and builds an order within its cap."""
    return [t for t in (zb_auto.zb_auto(problem), zbv.zbv(problem), v_auto.v_auto(problem)) if t is not None]

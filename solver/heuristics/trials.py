"""A counted search budget shared by the order searches (interleaved, V): the count makes answers
repeat on any load; the wall deadline is only a safety net, and ``cut`` says when it fired."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass


@dataclass
class Trials:
    """What the search may still spend: ``left`` orders to time (the deterministic budget) and a wall
    ``deadline`` (a ``time.perf_counter()`` value, only a net; ``cut`` says it ended the search)."""

    left: int
    deadline: float = math.inf
    cut: bool = False

    def take(self) -> bool:
        """Spend one trial; False (and nothing spent) once the count or the clock has run out."""
        if self.left <= 0:
            return False
        if time.perf_counter() >= self.deadline:
            self.cut = True
            return False
        self.left -= 1
        return True

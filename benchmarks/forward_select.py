"""Greedy forward selection, the rule the policy-tuning scripts (``tune_zb_policies.py``,
``tune_list_policies.py``) state before any figure: one implementation, so the families are chosen alike."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def forward_select(score: Callable[[Sequence[T]], float], pool: Sequence[T], chosen: Sequence[T],
                   max_size: int, min_gain: float) -> list[tuple[T, float, float]]:
    """From ``chosen``, add the pool member that lowers ``score`` most (ties: the earlier one) until the
    best addition gains less than ``min_gain`` or the set has ``max_size`` members; the additions as
    [(policy, score after, gain)] in order."""
    chosen = list(chosen)
    now = score(chosen)
    trace = []
    while len(chosen) < max_size:
        after, k = min((score([*chosen, c]), k) for k, c in enumerate(pool) if c not in chosen)
        if now - after < min_gain:
            break
        chosen.append(pool[k])
        trace.append((pool[k], after, now - after))
        print(f"  + {pool[k]}: excess {100 * after:.3f}% (gain {100 * (now - after):.3f} points)", file=sys.stderr)
        now = after
    return trace

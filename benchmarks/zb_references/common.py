"""What the zero-bubble authors' generators read, taken from a pipesched Problem, and how their output is timed.

Their generators take per-stage F/B/W costs, one point-to-point latency, per-stage memory deltas of the
three passes and a memory limit, and return each device's order of passes. :class:`Inputs` reads those
straight from the Problem's public fields (no solver internals), per model stage; :func:`order_of`
turns their ``(kind, stage, microbatch)`` lists into a pipesched order, and :func:`time_order` times
it with the same public path torch's orders use (``benchmarks/torch_orders.py``: optimal times for the
fixed order, dropped when over the cap or deadlocked), so every reference is judged by one clock.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pipesched.solver import Instance, Problem
from pipesched.solver.core.instance import OpId

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import torch_orders  # noqa: E402

Timed = torch_orders.Timed


class Unbuildable(Exception):
    """The generator got stuck where the authors' code asserts (a dependency not yet placed, memory
    that cannot be freed, a microbatch count overrun); that variant yields no order."""


def _stage_list(value: float | list[float], stages: int) -> list[float]:
    return [float(x) for x in value] if isinstance(value, list) else [float(value)] * stages


@dataclass(frozen=True)
class Inputs:
    """One problem as the authors' generators see it (lists per model stage, limits per device)."""

    devices: int
    microbatches: int
    cost: dict[str, list[float]]  # "F" / "B" / "W" -> per stage
    mem: dict[str, list[float]]  # "F" / "B" / "W" -> per stage memory delta
    limit: list[float]  # per device; math.inf without a cap
    comms: list[float]  # per boundary between stage k and k + 1

    @classmethod
    def of(cls, problem: Problem) -> Inputs:
        s = problem.num_stages
        c, mem = problem.costs, problem.memory
        cost = {k: _stage_list(x, s) for k, x in zip("FBW", (c.forward, c.backward_input, c.backward_weight),
                                                      strict=True)}
        deltas = {k: _stage_list(x, s) for k, x in zip("FBW", (mem.forward, mem.backward_input, mem.backward_weight),
                                                        strict=True)}
        if mem.limit is None:
            limit = [math.inf] * problem.devices
        else:
            limit = _stage_list(mem.limit, problem.devices)  # type: ignore[arg-type]
        return cls(problem.devices, problem.microbatches, cost, deltas, limit, _stage_list(c.comm, max(s - 1, 1)))

    def with_costs(self, cost: dict[str, list[float]]) -> Inputs:
        return Inputs(self.devices, self.microbatches, cost, self.mem, self.limit, self.comms)

    def median_costs(self) -> Inputs:
        """One cost per pass, as the authors' runtime hands their ZB-1p/2p heuristic: the upper median
        over stages (``sorted(x)[len(x) // 2]``)."""
        s = len(self.cost["F"])
        return self.with_costs({k: [sorted(x)[len(x) // 2]] * s for k, x in self.cost.items()})

    def v_median_costs(self) -> Inputs:
        """One cost per pass, as their runtime hands the ZB-V generator: each device's mean over its two
        stages, then the upper median over devices."""
        p, s = self.devices, len(self.cost["F"])
        out = {}
        for k, x in self.cost.items():
            means = sorted((x[d] + x[s - 1 - d]) / 2 for d in range(p))
            out[k] = [means[p // 2]] * s
        return self.with_costs(out)

    def comm(self, a: int, b: int) -> float:
        """Latency between adjacent stages ``a`` and ``b``."""
        return self.comms[min(a, b)] if self.comms else 0.0

    def fits(self, level: float, device: int) -> bool:
        """``level`` within the device's cap, with the validator's relative slack."""
        cap = self.limit[device]
        return level <= cap + 1e-9 * max(1.0, abs(cap))


def order_of(devices: Sequence[Sequence[tuple[str, int, int]]]) -> list[list[OpId]]:
    """Per-device ``(kind, stage, microbatch)`` lists -> a pipesched order."""
    return [[OpId(k, s, i) for k, s, i in ops] for ops in devices]  # type: ignore[arg-type]


def time_order(problem: Problem, name: str, order: list[list[OpId]]) -> Timed | None:
    """The order timed on the problem (None when it misses ops, deadlocks or exceeds the cap)."""
    return torch_orders.timed(Instance.from_problem(problem), name, order)


def best_of(problem: Problem, name: str, orders: Sequence[list[list[OpId]]]) -> Timed | None:
    """The best of a generator's variants under our timing (ties: the first), named ``name``."""
    best: Timed | None = None
    seen: set[str] = set()
    for order in orders:
        key = repr(order)
        if key in seen:
            continue
        seen.add(key)
        t = time_order(problem, name, order)
        if t is not None and (best is None or t.objective < best.objective):
            best = t
    return best

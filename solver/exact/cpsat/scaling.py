"""Integer units for CP-SAT: costs, comm and memory scaled by powers of ten, rounded down.

Why rounding down: every real schedule then maps (by flooring its times) onto a model solution no
worse than it, so the model is a relaxation and its proven bound, divided back, stays valid.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from ...core.instance import Instance
from ...core.tolerance import slack

#: Largest integer a scaled cost may reach; keeps the CP-SAT domains comfortably small.
MAX_SCALED_COST = 10**7
#: Largest scaled memory delta or limit.
MAX_SCALED_MEMORY = 10**9


def _integral(values: Iterable[float], factor: float) -> bool:
    return all(abs(x * factor - round(x * factor)) <= slack(x * factor) for x in values)


def _power_of_ten(values: list[float], max_scaled: float) -> tuple[int, bool]:
    """Coarsest ``10**k`` making every value an integer (exact), else the finest one that keeps
    the largest value within ``max_scaled`` (inexact: the caller rounds)."""
    top = max([abs(x) for x in values] + [1e-9])
    factor = 1
    for k in range(10):
        factor = 10**k
        if _integral(values, factor):
            return factor, True
        if top * 10 ** (k + 1) > max_scaled:
            break
    return factor, False


@dataclass(frozen=True)
class Scaling:
    """Integer units per caller unit, for time and for memory.

    ``time`` is the coarsest power of ten at which every cost and the comm latency are integers
    (``time_exact``); when no power up to ``MAX_SCALED_COST / largest cost`` does, costs are
    rounded down at that finest resolution. Memory likewise, but rounded *conservatively*
    (demands up, limits down) so model schedules always fit; then ``mem_exact`` is false and the
    model's bound proves nothing.
    """

    time: int
    time_exact: bool
    mem: int
    mem_exact: bool
    span_exact: bool = False  # stage span optima are whole units too (see bound_to_float)

    @classmethod
    def of(cls, inst: Instance) -> Scaling:
        costs = [x for k in inst.kinds for x in inst.duration[k]] + [inst.comm, *inst.comms, *inst.sync, *inst.optimizer]
        top = max(costs + [1e-9])
        time, time_exact = _power_of_ten(costs, MAX_SCALED_COST)
        mems = [x for k in inst.kinds for x in inst.delta[k]] + [x for x in inst.limit if math.isfinite(x)]
        mem, mem_exact = _power_of_ten(mems, MAX_SCALED_MEMORY)
        span_exact = False
        if inst.objective == "stage_span" and time_exact:
            lcm = math.lcm(*range(1, inst.devices + 1))
            if top * time * lcm <= MAX_SCALED_COST:
                time, span_exact = time * lcm, True
        return cls(time=time, time_exact=time_exact, mem=mem, mem_exact=mem_exact, span_exact=span_exact)

    def dur(self, x: float) -> int:
        return int(math.floor(x * self.time + slack(x * self.time)))

    def up(self, x: float) -> int:
        return int(math.ceil(x * self.time - slack(x * self.time)))

    def demand(self, x: float) -> int:
        y = x * self.mem
        return int(round(y)) if self.mem_exact else int(math.ceil(y - 1e-12))

    def capacity(self, x: float) -> int:
        y = x * self.mem
        return int(round(y)) if self.mem_exact else int(math.floor(y + 1e-12))

    @property
    def bound_is_valid(self) -> bool:
        return self.mem_exact

    def bound_to_float(self, value: float, objective: str, devices: int) -> float:
        """A model bound in caller units.

        Makespan: flooring keeps every end at or before its real end, so ``OPT * time >= value``.
        Stage span: flooring both ends of a window can add one unit, so ``ceil(OPT * time) >= value``;
        with exact costs the span optimum of a fixed order is the largest cycle ratio ``W / k`` of a
        difference system, ``k <= devices`` span rows on the cycle, hence a multiple of
        ``1 / devices`` units, so ``OPT * time >= value - 1 + 1 / devices``. When the resolution was
        multiplied by ``lcm(1..devices)`` (``span_exact``) every such ratio is a whole unit and the
        model is exact.
        """
        if objective != "stage_span" or self.span_exact:
            return value / self.time
        return (value - 1 + (1 / devices if self.time_exact else 0)) / self.time

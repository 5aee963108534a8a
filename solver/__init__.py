"""pipesched.solver: problem and schedule models, simulator, validator, bounds and methods.

Imports neither FastAPI nor torch. ``solve``, ``methods`` and ``get_method`` come from
:mod:`.registry`, loaded on first use: the exact models it imports pull in OR-Tools and PuLP.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .core.errors import InvalidScheduleError, NotApplicableError
from .core.instance import Instance, OpId, stage_device
from .core.method import Method, SolveOptions
from .core.problem import Costs, Memory, Problem, ProblemCaps, Units
from .core.schedule import Order, Schedule, ScheduledOp
from .timing.finalize import finalize, from_order, no_schedule
from .timing.simulate import DeadlockError, simulate
from .timing.validate import validate

if TYPE_CHECKING:
    from .registry import get_method, methods, solve

_FROM_REGISTRY = ("get_method", "methods", "solve")

__all__ = [
    "Costs", "DeadlockError", "Instance", "InvalidScheduleError", "Memory", "Method", "NotApplicableError", "OpId",
    "Order", "Problem", "ProblemCaps", "Schedule", "Units", "ScheduledOp", "SolveOptions", "finalize", "from_order",
    "get_method", "methods", "no_schedule", "simulate", "solve", "stage_device", "validate",
]


def __getattr__(name: str) -> Any:
    if name in _FROM_REGISTRY:
        from . import registry

        value = getattr(registry, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pipesched.solver' has no attribute {name!r}")

"""pipesched.solver: problem and schedule models, simulator, validator, bounds and methods.

Imports neither FastAPI nor torch.
"""

from .core.errors import InvalidScheduleError, NotApplicableError
from .core.instance import Instance, OpId, stage_device
from .core.problem import Costs, Memory, Problem, ProblemCaps, Units
from .core.registry import SolveOptions, get_method, methods, solve
from .core.schedule import Order, Schedule, ScheduledOp
from .timing.finalize import finalize, from_order, no_schedule
from .timing.simulate import DeadlockError, simulate
from .timing.validate import validate

__all__ = [
    "Costs", "DeadlockError", "Instance", "InvalidScheduleError", "Memory", "NotApplicableError", "OpId",
    "Order", "Problem", "ProblemCaps", "Schedule", "Units", "ScheduledOp", "SolveOptions", "finalize", "from_order",
    "get_method", "methods", "no_schedule", "simulate", "solve", "stage_device", "validate",
]

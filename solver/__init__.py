"""pipesched.solver: problem and schedule models, simulator, validator, bounds and methods.

Imports neither FastAPI nor torch.
"""

from .build import finalize, from_order, no_schedule
from .errors import InvalidScheduleError, NotApplicableError
from .instance import Instance, OpId, stage_device
from .problem import Costs, Memory, Problem, ProblemCaps
from .registry import SolveOptions, get_method, methods, solve
from .schedule import Order, Schedule, ScheduledOp
from .simulate import DeadlockError, simulate
from .validate import validate

__all__ = [
    "Costs", "DeadlockError", "Instance", "InvalidScheduleError", "Memory", "NotApplicableError", "OpId",
    "Order", "Problem", "ProblemCaps", "Schedule", "ScheduledOp", "SolveOptions", "finalize", "from_order",
    "get_method", "methods", "no_schedule", "simulate", "solve", "stage_device", "validate",
]

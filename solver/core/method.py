"""What a scheduling method is: a record, declared in the module that implements it.

Why a record and not a name: the portfolio, the warm starts, the service and the CLI all ask the same
questions of a method (does it apply? is it a fixed recipe or a search? what does one run cost? does it
read a hint? which optional parts of a problem does it model?). Answering them from strings (a name
list to skip, the package a function lives in) let a method ship unregistered and a new Problem field
be ignored silently. Each method module defines its :class:`Method` records; the facade
(:mod:`pipesched.solver.registry`) imports them explicitly, so the layering test sees every dependency.

Every method has one signature: problem + :class:`SolveOptions` in, validated schedule out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from .problem import Problem
from .schedule import Schedule

#: What a method is, which decides how the portfolio uses it:
#: ``recipe`` a closed-form order (one simulation), ``search`` a heuristic that looks at the problem,
#: ``exact`` a model that can prove optimality, ``portfolio`` a method that runs the others.
Role = Literal["recipe", "search", "exact", "portfolio"]
ROLES: tuple[Role, ...] = ("recipe", "search", "exact", "portfolio")


@dataclass(frozen=True)
class SolveOptions:
    """Knobs shared by all methods; heuristics ignore what they do not need."""

    time_limit_s: float = 10.0
    hint: Schedule | None = None  # a known schedule to warm-start from (e.g. a cached entry)
    workers: int = 2  # solver threads; results must not depend on it (determinism)
    backend: str | None = None  # method-specific engine, e.g. the ILP's "cbc" (default) or "highs"


Applies = Callable[[Problem], str | None]
SolveFn = Callable[[Problem, SolveOptions], Schedule]


def _nonzero(value: float | list[float]) -> bool:
    return any(x != 0 for x in value) if isinstance(value, list) else value != 0


def _comm(problem: Problem) -> bool:
    return _nonzero(problem.costs.comm)


def _transient(problem: Problem) -> bool:
    return _nonzero(problem.memory.backward_input_transient)


#: Optional parts of a problem that change what a schedule must account for beyond its ops and their
#: order, each with the test that says a problem uses it. A method either models a feature (it is in
#: :attr:`Method.supports`) or refuses the problem naming it; it never ignores one. Order-based methods
#: (recipes and searches) support every feature: the simulator times their orders with all of them and
#: the validator checks the result, so they are listed by the exact models that do not.
FEATURES: dict[str, Callable[[Problem], bool]] = {
    "memory.limit": lambda p: p.memory.limit is not None,
    "costs.comm": _comm,
    "costs.overlap_fb": lambda p: p.costs.overlap_fb is not None,
    "memory.backward_input_transient": _transient,
    "costs.grad_sync": lambda p: _nonzero(p.costs.grad_sync),
    "costs.optimizer": lambda p: _nonzero(p.costs.optimizer),
}
ALL_FEATURES: frozenset[str] = frozenset(FEATURES)


def problem_features(problem: Problem) -> frozenset[str]:
    """The optional features ``problem`` uses (keys of :data:`FEATURES`)."""
    return frozenset(name for name, used in FEATURES.items() if used(problem))


def _always(_problem: Problem) -> str | None:
    return None


@dataclass(frozen=True)
class Method:
    """One scheduling method (see the module docstring).

    ``requires`` says why the method cannot schedule a problem's *shape* (placement, v, fused
    backward, size), None when it can; ``supports`` lists the optional features it models;
    ``cost_per_op`` is the estimated wall seconds per op of one run on a shared machine (what the
    portfolio charges for running it; 0 for methods sized by their time limit); ``unsupported`` is the
    advice added when a feature is refused.
    """

    name: str
    summary: str  # one line: what it is and when it applies
    role: Role
    run: SolveFn
    requires: Applies = _always
    supports: frozenset[str] = ALL_FEATURES
    cost_per_op: float = 0.0
    warm_start: bool = False  # reads SolveOptions.hint
    unsupported: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"method {self.name!r}: role must be one of {ROLES} (got {self.role!r})")
        unknown = sorted(self.supports - ALL_FEATURES)
        if unknown:
            raise ValueError(f"method {self.name!r} supports unknown features {unknown}; known: {sorted(FEATURES)}")

    def applies(self, problem: Problem) -> str | None:
        """Why this method cannot schedule ``problem`` (one line naming the field), None when it can."""
        missing = sorted(problem_features(problem) - self.supports)
        if missing:
            advice = f"; {self.unsupported}" if self.unsupported else ""
            return f"{self.name} does not model {', '.join(missing)}{advice}"
        return self.requires(problem)

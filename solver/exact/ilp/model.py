"""The ILP model's data: the PuLP problem and the handles to warm-start and read it back (shared by
:mod:`.formulation`, :mod:`.step` and :mod:`.backends`)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from types import ModuleType

from ...core.instance import Instance, OpId


def _import_pulp() -> ModuleType:
    """Import PuLP without letting it import ``highspy``.

    PuLP imports ``highspy`` (when installed) while it is imported, and ``highspy`` next to
    OR-Tools in one process fails with an undefined symbol. We never use PuLP's in-process HiGHS
    (HiGHS runs in a subprocess, see :mod:`.highs_worker`), so hide it meanwhile.
    """
    if "pulp" in sys.modules or "highspy" in sys.modules:
        import pulp

        return pulp
    sys.modules["highspy"] = None  # type: ignore[assignment]  # makes `import highspy` fail
    try:
        import pulp
    finally:
        del sys.modules["highspy"]
    return pulp


pulp = _import_pulp()


def new_var(prob: pulp.LpProblem, name: str, low: float | None = None, up: float | None = None,
         cat: str = "Continuous") -> pulp.LpVariable:
    """A variable owned by ``prob`` (PuLP >= 3.3 deprecates the free-standing constructor)."""
    add = getattr(prob, "add_variable", None)
    return add(name, low, up, cat) if add else pulp.LpVariable(name, low, up, cat)


# ------------------------------------------------------------------------------------ model
@dataclass
class IlpModel:
    """The PuLP problem plus the handles needed to warm-start it and read it back."""

    inst: Instance
    horizon: float
    prob: pulp.LpProblem
    ops: list[OpId]
    es: dict[OpId, float]
    ls: dict[OpId, float]
    start: dict[OpId, pulp.LpVariable] = field(default_factory=dict)
    #: ``pair[(a, b)]`` for a before b in :attr:`ops` order: a binary, or a fixed 0/1.
    pair: dict[tuple[OpId, OpId], pulp.LpVariable | int] = field(default_factory=dict)
    first: dict[int, pulp.LpVariable] = field(default_factory=dict)
    last: dict[int, pulp.LpVariable] = field(default_factory=dict)
    objective: pulp.LpVariable | None = None
    #: The step's tail (:mod:`.step`): sync starts per stage, lane-order binaries, optimizer starts.
    sync_start: dict[int, pulp.LpVariable] = field(default_factory=dict)
    sync_pair: dict[tuple[int, int], pulp.LpVariable] = field(default_factory=dict)
    step_start: dict[int, pulp.LpVariable] = field(default_factory=dict)

    def device_ops(self) -> list[list[OpId]]:
        out: list[list[OpId]] = [[] for _ in range(self.inst.devices)]
        for op in self.ops:
            out[self.inst.device(op)].append(op)
        return out

    def before(self, a: OpId, b: OpId) -> pulp.LpVariable | pulp.LpAffineExpression | int:
        """``y_ab``: 1 when a runs before b (a binary, its complement, or a constant)."""
        if (a, b) in self.pair:
            return self.pair[(a, b)]
        y = self.pair[(b, a)]
        return 1 - y

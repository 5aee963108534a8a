"""torch 2.13's schedule orders for a Problem, re-timed on our costs and memory model (issue 12).

Why: a reference that nobody here tuned. torch.distributed.pipelining builds each rank's compute
order in ``_calculate_single_rank_operations``, a pure function of a few attributes (group size,
microbatches, local stages, rounds); we call it on a stand-in object (no process group, no stages,
no tensors; the way ``tests/solver/test_looped_bfs.py`` reads ScheduleLoopedBFS), keep the
compute actions in the order torch runs them, and time that order with our simulator
(:func:`pipesched.solver.timing.retime.retime`: optimal times for the fixed order, our costs and comm).
An order over ``memory.limit`` on some device, or one that deadlocks on our dependencies, is dropped.

Action mapping (torch -> ours): ``F`` -> F; ``I`` (input-gradient backward) -> B; ``W`` -> W;
``B`` (full backward) -> B then W right after it; ``OVERLAP_F_B`` -> its sub-actions in order.
For a fused backward (``split_backward: false``) ``I`` and ``B`` map to our B and ``W`` is dropped.

Orders (where they apply, as torch's constructors require):
- loop placement, v >= 2: ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble (both need
  ``m % max(1, m // p) == 0``), ScheduleLoopedBFS;
- V placement (v = 2): ScheduleZBVZeroBubble, ScheduleDualPipeV (``m >= 2p``).

:func:`reference` is the issue's reference: the best of every applicable recipe of ours (each
registered method except ``auto``, ``cpsat``, ``ilp``) and these torch orders, within the cap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

from pipesched.solver import Instance, Problem, SolveOptions
from pipesched.solver.core.instance import OpId
from pipesched.solver.core.metrics import peak_memory
from pipesched.solver.core.schedule import Order
from pipesched.solver.core.tolerance import slack
from pipesched.solver.heuristics.warm_start import recipe_orders
from pipesched.solver.timing.retime import Incumbent, retime
from pipesched.solver.timing.simulate import DeadlockError

TORCH_NAMES = ("torch-interleaved-1f1b", "torch-interleaved-zb", "torch-looped-bfs", "torch-zbv", "torch-dualpipev")


@dataclass(frozen=True)
class Timed:
    """One reference candidate: its name, order, exact times and objective, and per-device peak."""

    name: str
    incumbent: Incumbent
    peak: float

    @property
    def objective(self) -> float:
        return self.incumbent.objective


def _schedules():  # noqa: ANN202 - torch's module, imported lazily (the solver never imports torch)
    from torch.distributed.pipelining import schedules

    return schedules


def _rounds(p: int, m: int) -> SimpleNamespace | None:
    """torch's interleaved rounds (``number_of_rounds = max(1, m // p)``), None when its constructor refuses m."""
    rounds = max(1, m // p)
    if m % rounds:
        return None
    return SimpleNamespace(number_of_rounds=rounds, microbatches_per_round=m // rounds)


def _stand_in(cls_name: str, p: int, m: int, v: int) -> SimpleNamespace | None:
    """The attributes ``cls_name._calculate_single_rank_operations`` reads, or None when torch's
    constructor would reject (p, m, v)."""
    base = SimpleNamespace(pp_group_size=p, _n_microbatches=m, n_local_stages=v, _stages=[None] * v,
                           num_stages=p * v, _num_stages=p * v)
    if cls_name in ("ScheduleInterleaved1F1B", "ScheduleInterleavedZeroBubble"):
        rounds = _rounds(p, m)
        if rounds is None:
            return None
        base.__dict__.update(rounds.__dict__)
    if cls_name == "ScheduleDualPipeV" and m < 2 * p:
        return None
    return base


def _applicable(problem: Problem) -> list[tuple[str, str]]:
    """(our name, torch class) for every torch order that applies to the problem's placement."""
    if problem.placement == "v":
        return [("torch-zbv", "ScheduleZBVZeroBubble"), ("torch-dualpipev", "ScheduleDualPipeV")]
    if problem.stages_per_device >= 2:
        return [("torch-interleaved-1f1b", "ScheduleInterleaved1F1B"),
                ("torch-interleaved-zb", "ScheduleInterleavedZeroBubble"),
                ("torch-looped-bfs", "ScheduleLoopedBFS")]
    return []


def _ours(action: object, split: bool, kind_of: Callable[[object], str]) -> list[OpId]:
    """Our ops for one torch compute action (see the module docstring for the mapping)."""
    subs = getattr(action, "sub_actions", None)
    if subs:
        return [op for sub in subs for op in _ours(sub, split, kind_of)]
    kind, s, i = kind_of(action), action.stage_index, action.microbatch_index  # type: ignore[attr-defined]
    if kind == "F":
        return [OpId("F", s, i)]
    if kind == "I":
        return [OpId("B", s, i)]
    if kind == "W":
        return [OpId("W", s, i)] if split else []
    if kind == "B":
        return [OpId("B", s, i), OpId("W", s, i)] if split else [OpId("B", s, i)]
    raise ValueError(f"unexpected torch compute action {action!r}")


def torch_order(problem: Problem, cls_name: str) -> Order | None:
    """Per-device order of torch's ``cls_name`` for ``problem`` (None when torch would refuse it)."""
    sch = _schedules()
    p, m, v = problem.devices, problem.microbatches, problem.stages_per_device
    fake = _stand_in(cls_name, p, m, v)
    if fake is None:
        return None
    cls = getattr(sch, cls_name)
    ct = sch._ComputationType
    letters = {ct.FORWARD: "F", ct.BACKWARD_INPUT: "I", ct.BACKWARD_WEIGHT: "W", ct.FULL_BACKWARD: "B"}

    def kind_of(a: object) -> str:
        return letters[a.computation_type]  # type: ignore[attr-defined]

    order: Order = []
    for rank in range(p):
        actions = cls._calculate_single_rank_operations(fake, rank)
        order.append([op for a in actions if a is not None for op in _ours(a, problem.split_backward, kind_of)])
    return order


def timed(inst: Instance, name: str, order: Order) -> Timed | None:
    """The order re-timed on our model; None when it deadlocks, misses ops or exceeds the cap."""
    if sorted(op for ops in order for op in ops) != sorted(inst.ops()):
        return None
    peaks = peak_memory(inst, order)
    if any(pk > lim + slack(lim) for pk, lim in zip(peaks, inst.limit, strict=True)):
        return None
    try:
        inc = retime(inst, order)
    except DeadlockError:
        return None
    return Timed(name, inc, max(peaks, default=0.0))


def torch_candidates(problem: Problem) -> list[Timed]:
    """Every applicable torch order that runs within the cap, re-timed (empty without torch)."""
    try:
        _schedules()
    except ImportError:
        return []
    inst = Instance.from_problem(problem)
    out = []
    for name, cls_name in _applicable(problem):
        order = torch_order(problem, cls_name)
        if order is not None and (t := timed(inst, name, order)) is not None:
            out.append(t)
    return out


def recipe_candidates(problem: Problem) -> list[Timed]:
    """Every applicable recipe of ours (registered heuristics, not the exact methods) within the cap,
    each re-timed optimally for its order, as ``auto`` re-times its incumbents."""
    inst = Instance.from_problem(problem)
    out = []
    for name, order in recipe_orders(problem, SolveOptions(time_limit_s=10)):
        if (t := timed(inst, name, order)) is not None:
            out.append(t)
    return out


def reference(problem: Problem, *, recipes: bool = True) -> Timed | None:
    """The issue's reference: the best recipe of ours or torch order within the cap (None if none fits)."""
    cands = torch_candidates(problem) + (recipe_candidates(problem) if recipes else [])
    return min(cands, key=lambda t: t.objective, default=None)


def uncapped_peak(problem: Problem, cls_name: str) -> float | None:
    """Largest per-device peak of torch's ``cls_name`` order on ``problem`` ignoring its cap (used to
    set the cap of target 3's family to ScheduleInterleavedZeroBubble's own peak)."""
    order = torch_order(problem, cls_name)
    if order is None:
        return None
    inst = Instance.from_problem(problem.model_copy(update={"memory": problem.memory.model_copy(update={"limit": None})}))
    return max(peak_memory(inst, order))


if __name__ == "__main__":
    import sys
    from pathlib import Path

    prob = Problem.model_validate_json(Path(sys.argv[1]).read_text())
    for t in sorted(torch_candidates(prob) + recipe_candidates(prob), key=lambda t: t.objective):
        print(f"{t.name:24} {t.objective:.6g}  peak {t.peak:.6g}")

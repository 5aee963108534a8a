"""The CP-SAT formulation, one function per family of constraints (read it next to the maths).

It reads top to bottom like OR-Tools' ``minimal_jobshop_sat.py``: 1. data, 2. variables, 3. no
overlap, 4. precedences, 5. memory, 6. objective, 7. the whole model, 8. read-back; each section
opens with its maths. Integer units are :mod:`.scaling`; how CP-SAT searches (parameters, hints,
search order, the deterministic budget) is :mod:`.run`.

Variables: an integer start ``x_o`` per op ``o``; a fixed-size interval ``[x_o, x_o + d_o)``.

- no overlap: ``NoOverlap`` of the intervals of each device;
- precedence: ``x_b >= x_a + d_a + lag(a, b)`` for every dependency ``a -> b`` (lag = comm across devices);
- microbatch order (symmetry breaking): ``x_(k,s,i+1) >= x_(k,s,i) + d`` for every kind ``k`` and
  stage ``s``. Microbatches are identical, so swapping the futures of two microbatches from the
  first op where they run out of order gives a schedule with the same times, device memory events
  and objective (an exchange argument, stage by stage: F in model order, then B from the last
  stage down, then W); some optimal schedule is therefore in microbatch order on every stage;
- memory: a cumulative per device whose demands are the activations each microbatch holds
  between its ops (:func:`add_memory`), or a reservoir of the deltas when the deltas do not
  decompose that way; plus the memory chains ``F(s, j + k)`` after microbatch ``j`` frees its
  memory (:func:`add_memory_chain`), which replace the cumulative when they express the cap exactly
  (one stage per device, a microbatch holds ``dF`` from its F to one releasing op: e.g. unit
  deltas +1/0/-1). The model is then precedences and no-overlaps only
  (:attr:`CpsatModel.precedences_only`), which CP-SAT searches much faster without its LP;
- objective ``Z``: makespan ``Z >= end`` of every stage's last op, or stage span
  ``Z >= last_d - first_d`` where, in microbatch order, ``first_d`` is the start of the first
  forward of the device's lowest stage and ``last_d`` the end of the last microbatch's final op;
  with a step tail (:func:`add_step_tail`) ``last_d`` is the end of the device's optimizer step.

Integer time: costs are multiplied by a :class:`Scaling` and rounded *down*, so every real
schedule maps (by flooring its times) onto a model solution no worse than it (up to one unit
for a span). The model is a relaxation and its proven bound, divided back, is a valid bound
(:meth:`Scaling.bound_to_float`). With costs exact at the resolution, a makespan optimum is an
integer number of units (earliest times of an order are sums of costs), so the model is exact.
Schedules are never read back from model times: the per-device order is, and the simulator
re-times it exactly in the caller's units.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from ...core.instance import Instance, OpId
from ...core.ops import dependency_rank
from .scaling import Scaling

# ---- 1. Data: the ops, their dependencies with integer lags, and the model's handles -------------

@dataclass
class OpGraph:
    """What the model schedules: ops, their dependencies with integer lags, and optional heads/tails.

    The full problem uses every op and :meth:`Instance.predecessors`; a relaxation keeps some
    devices and contracts the dependency chains through the others into lags.
    """

    ops: list[OpId]
    prec: list[tuple[OpId, OpId, int]]
    release: dict[OpId, int] = field(default_factory=dict)  # earliest start
    tail: dict[OpId, int] = field(default_factory=dict)  # time that must follow the op's end (makespan)
    step: bool = False  # every op: the step's tail (syncs, optimizer) is modelled too

    @classmethod
    def full(cls, inst: Instance, sc: Scaling) -> OpGraph:
        ops = inst.ops()
        prec = [(a, op, sc.dur(lag)) for op in ops for a, lag in inst.predecessors(op)]
        return cls(ops, prec, step=inst.tail)


@dataclass
class CpsatModel:
    """A built model and its variables."""

    inst: Instance
    sc: Scaling
    graph: OpGraph
    horizon: int
    model: cp_model.CpModel = field(default_factory=cp_model.CpModel)
    start: dict[OpId, cp_model.IntVar] = field(default_factory=dict)
    dur: dict[OpId, int] = field(default_factory=dict)
    interval: dict[OpId, cp_model.IntervalVar] = field(default_factory=dict)
    objective: cp_model.IntVar | None = None
    #: Per device, when its step ends (its optimizer step), when the step's tail is modelled.
    step_end: dict[int, cp_model.LinearExprT] = field(default_factory=dict)
    sync_start: dict[int, cp_model.IntVar] = field(default_factory=dict)  # per stage
    step_start: dict[int, cp_model.IntVar] = field(default_factory=dict)  # per device
    #: True when memory caps exist and all of them are expressed exactly by precedences: the model has
    #: no cumulative or reservoir (see :func:`add_memory_chain`).
    precedences_only: bool = False

    def end(self, op: OpId) -> cp_model.LinearExprT:
        return self.start[op] + self.dur[op]


# ---- 2. Variables: a start x_o and a fixed-size interval [x_o, x_o + d_o) per op -----------------
# d_o = floor(cost_o * time scale); release_o <= x_o <= horizon - d_o

def add_op_intervals(cm: CpsatModel) -> None:
    """One start variable and one fixed-size interval per op."""
    for op in cm.graph.ops:
        d = cm.sc.dur(cm.inst.cost(op))
        lo = cm.graph.release.get(op, 0)
        x = cm.model.new_int_var(lo, max(lo, cm.horizon - d), f"x{op.kind}{op.stage}_{op.microbatch}")
        cm.start[op], cm.dur[op] = x, d
        cm.interval[op] = cm.model.new_fixed_size_interval_var(x, d, f"i{op.kind}{op.stage}_{op.microbatch}")


# ---- 3. No overlap: one op at a time per device --------------------------------------------------
# NoOverlap({[x_o, x_o + d_o) : device(o) = d}) for every device d

def add_device_no_overlap(cm: CpsatModel) -> None:
    per: dict[int, list[cp_model.IntervalVar]] = {}
    for op in cm.graph.ops:
        per.setdefault(cm.inst.device(op), []).append(cm.interval[op])
    for d in sorted(per):
        cm.model.add_no_overlap(per[d])


# ---- 4. Precedences: dependencies with comm, and microbatch order (symmetry breaking) ------------
# x_b >= x_a + d_a + lag(a, b)            for every dependency a -> b
# x_(k,s,i+1) >= x_(k,s,i) + d_(k,s,i)    for every kind k, stage s, microbatch i

def add_precedences(cm: CpsatModel) -> None:
    for a, b, lag in cm.graph.prec:
        cm.model.add(cm.start[b] >= cm.end(a) + lag)


def add_microbatch_order(cm: CpsatModel) -> None:
    """Symmetry breaking: on each stage, ops of one kind run in microbatch order."""
    present = set(cm.graph.ops)
    for op in cm.graph.ops:
        nxt = OpId(op.kind, op.stage, op.microbatch + 1)
        if nxt in present:
            cm.model.add(cm.start[nxt] >= cm.end(op))


# ---- 5. Memory: the per-device cap ---------------------------------------------------------------
# event(o) = x_o if delta_o > 0 else x_o + d_o; a microbatch on stage s holds L1 = dF from
# event(F) to event(B) and L2 = dF + dB from event(B) to event(W):
#   chains (exact for one stage per device):  event(F(s, j + k)) >= event(R(s, j)),  k = floor((cap - L1) / hold) + 1
#   cumulative (levels >= 0):                  sum of holds over intervals <= cap
#   reservoir (otherwise):                     running sum of the raw deltas in [.., cap]

def add_memory_chain(cm: CpsatModel) -> frozenset[int]:
    """Memory caps as precedences ``event(F(s, j + k)) >= event(R(s, j))``; returns the devices whose
    cap they express exactly (:func:`add_memory` then skips them).

    Valid when every level is >= 0 (as for the cumulative): microbatch j holds ``L1`` from its F event
    to its B event and at least ``min(L1, L2)`` to its W event (its releasing event ``R``). If
    F(s, j + k)'s event came before R(s, j), microbatches j .. j + k - 1 would all be holding that
    memory at that moment (F, B and W run in microbatch order, so their F events are no later and their
    releasing events no earlier than those of j), and with F(s, j + k)'s own ``L1`` the device would
    hold at least ``k * hold + L1 > cap`` for ``k = floor((cap - L1) / hold) + 1``. Other stages of
    the device only add memory.

    Exact (:func:`_chain_is_exact`): memory is ``L1 * (microbatches in flight)``, and with F and R in
    microbatch order the microbatches in flight at F(s, j + k)'s event are those after the last
    released one, so the cap ``floor(cap / L1)`` microbatches in flight is exactly the chain.
    """
    inst, sc = cm.inst, cm.sc
    present = set(cm.graph.ops)
    exact: set[int] = set()
    for d, stages in enumerate(inst.stages_of_device):
        if not stages or not math.isfinite(inst.limit[d]):
            continue
        cap = sc.capacity(inst.limit[d])
        for s, kind, k in _memory_chains(inst, sc, stages, cap):
            for j in range(inst.microbatches - k):
                f, r = OpId("F", s, j + k), OpId(kind, s, j)
                if f in present and r in present:
                    cm.model.add(_event(cm, f) >= _event(cm, r))
        if _chain_is_exact(inst, sc, stages):
            exact.add(d)
    return frozenset(exact)


def add_memory(cm: CpsatModel, skip: frozenset[int] = frozenset()) -> None:
    """Per-device memory cap.

    A microbatch on stage s holds ``L1 = dF`` from its F event to its B event and ``L2 = dF + dB``
    from its B event to its W event (events: start for a positive delta, end otherwise). That is
    ``min(L1, L2)`` over [F event, W event) plus the difference over the shorter span: a sum of
    intervals, so a cumulative with capacity = limit. Deltas with a negative level fall back to
    a reservoir of the raw events. Devices in ``skip`` (their memory chains are exact) get nothing.
    """
    inst, sc, model = cm.inst, cm.sc, cm.model
    per: dict[int, list[OpId]] = {}
    for op in cm.graph.ops:
        per.setdefault(inst.device(op), []).append(op)
    for d in sorted(per):
        if not math.isfinite(inst.limit[d]) or d in skip:
            continue
        cap = sc.capacity(inst.limit[d])
        ops = set(per[d])
        stages = sorted({op.stage for op in ops})
        if all(_levels(inst, s) is not None for s in stages):
            _memory_cumulative(cm, ops, cap)
        else:
            times, changes = [], []
            for op in sorted(ops):
                delta = sc.demand(inst.mem(op)) if inst.mem(op) > 0 else -sc.capacity(-inst.mem(op))
                if delta:
                    times.append(cm.start[op] if delta > 0 else cm.end(op))
                    changes.append(delta)
            if times:
                model.add_reservoir_constraint(times, changes, -sum(abs(c) for c in changes), cap)


def _levels(inst: Instance, stage: int) -> tuple[float, float] | None:
    """Memory a microbatch holds on ``stage`` after its F and after its B (None if not both >= 0)."""
    l1 = inst.delta["F"][stage]
    l2 = l1 + inst.delta["B"][stage] if inst.split_backward else 0.0
    return (l1, l2) if l1 >= 0 and l2 >= 0 else None


def _event(cm: CpsatModel, op: OpId) -> cp_model.LinearExprT:
    return cm.start[op] if cm.inst.mem(op) > 0 else cm.end(op)


def _memory_cumulative(cm: CpsatModel, ops: set[OpId], cap: int) -> None:
    inst, sc, model = cm.inst, cm.sc, cm.model
    intervals, demands = [], []

    def hold(a: cp_model.LinearExprT, b: cp_model.LinearExprT, amount: int, name: str) -> None:
        if amount <= 0:
            return
        size = model.new_int_var(0, cm.horizon, name)
        intervals.append(model.new_interval_var(a, size, b, "h" + name))
        demands.append(amount)

    for op in sorted(ops):
        if op.kind != "F":
            continue
        s, i = op.stage, op.microbatch
        f, b = op, OpId("B", s, i)
        if b not in ops:
            continue
        l1 = sc.demand(inst.delta["F"][s])
        if not inst.split_backward:
            hold(_event(cm, f), _event(cm, b), l1, f"m{s}_{i}")
            continue
        w = OpId("W", s, i)
        l2 = sc.demand(inst.delta["F"][s] + inst.delta["B"][s])
        low = min(l1, l2)
        hold(_event(cm, f), _event(cm, w), low, f"m{s}_{i}")
        hold(_event(cm, f), _event(cm, b), l1 - low, f"n{s}_{i}")
        hold(_event(cm, b), _event(cm, w), l2 - low, f"o{s}_{i}")
    if intervals and cap < sum(demands):
        model.add_cumulative(intervals, demands, cap)


def _memory_chains(inst: Instance, sc: Scaling, stages: Iterable[int], cap: int) -> list[tuple[int, str, int]]:
    """``(stage, releasing kind, k)`` for :func:`add_memory_chain` (none if a level is negative)."""
    out = []
    for s in stages:
        levels = _levels(inst, s)
        if levels is None:
            return []
        l1 = sc.demand(levels[0])
        if l1 <= 0 or l1 > cap:
            continue
        low = min(l1, sc.demand(levels[1])) if inst.split_backward else 0
        if low < l1:  # the W chain below implies this one when the memory is held until W at full L1
            out.append((s, "B", cap // l1))  # microbatch j holds L1 until its B event
        if low > 0:
            out.append((s, "W", (cap - l1) // low + 1))  # and min(L1, L2) until its W event
    return out


def _chain_is_exact(inst: Instance, sc: Scaling, stages: tuple[int, ...]) -> bool:
    """One stage; a microbatch holds exactly ``L1 = dF > 0`` from its F event to its releasing event
    (fused: B frees it all; split: ``dB = 0`` and W frees it all), so memory = ``L1`` x in flight."""
    if len(stages) != 1 or not sc.mem_exact:
        return False
    s = stages[0]
    df = inst.delta["F"][s]
    if df <= 0:
        return False
    if not inst.split_backward:
        return inst.delta["B"][s] == -df
    return inst.delta["B"][s] == 0 and inst.delta["W"][s] == -df


def needs_memory_resource(inst: Instance, sc: Scaling) -> bool:
    """Whether some device's cap is not said exactly by its memory chains, so the model carries a
    cumulative or reservoir (whose search CP-SAT's deterministic clock measures very differently)."""
    return any(stages and math.isfinite(inst.limit[d]) and not _chain_is_exact(inst, sc, stages)
               for d, stages in enumerate(inst.stages_of_device))


# ---- 6. Objective: makespan or stage span --------------------------------------------------------
# makespan:    Z >= x_o + d_o + tail_o          for each device's possible last ops o
# stage span:  Z >= x_last(d) + d_last(d) - x_first(d)   for every device d
# lower <= Z <= upper (a valid bound and the incumbent); minimise Z

def device_first_last(cm: CpsatModel) -> dict[int, tuple[list[OpId], list[OpId]]]:
    """Per device: the ops one of which starts first and the ops one of which ends last, given
    microbatch order (one of each per chain the device is on: two under the dual placement).

    Everything a microbatch does on a device follows its forward on the device's lowest stage of its
    chain; everything on a stage ends by that stage's final op of the chain's last microbatch (W, or
    the fused B of the device's lowest stage, which the backward chain reaches last).
    """
    inst = cm.inst
    present = set(cm.graph.ops)
    out: dict[int, tuple[list[OpId], list[OpId]]] = {}
    for d, stages in enumerate(inst.stages_of_device):
        chains: dict[tuple[int, int], list[int]] = {}
        for s in stages:
            chains.setdefault(inst.copy_range(s), []).append(s)
        firsts: list[OpId] = []
        last: list[OpId] = []
        for mine in chains.values():
            mbs = inst.stage_microbatches(mine[0])
            if not mbs:
                continue
            firsts.append(OpId("F", min(mine), mbs[0]))
            last += [OpId("W", s, mbs[-1]) for s in mine] if inst.split_backward else [OpId("B", min(mine), mbs[-1])]
        firsts = [op for op in firsts if op in present]
        if firsts:
            out[d] = (firsts, [op for op in last if op in present])
    return out


# ---- 5b. The step's tail: gradient syncs on one lane per device, then the optimizer -------------
# y_s >= x_last(s) + d_last(s)            sync of stage s after its last W (B when fused)
# NoOverlap({[y_s, y_s + g_s) : s on d}) for every device d
# u_d >= y_s + g_s (s on d),  u_d >= x_o + d_o (o one of d's last ops);  e_d = u_d + opt_d

def add_step_tail(cm: CpsatModel, last: dict[int, tuple[list[OpId], list[OpId]]]) -> None:
    """The syncs and optimizer steps (:mod:`pipesched.solver.core.step`) as intervals; ``last``: per
    device the ops one of which ends last (:func:`device_first_last`). In microbatch order a stage's
    last W (or fused B) is its last microbatch's."""
    inst, sc, model = cm.inst, cm.sc, cm.model
    present = set(cm.graph.ops)
    kind = "W" if inst.split_backward else "B"
    for d, stages in enumerate(inst.stages_of_device):
        lane = []
        step = model.new_int_var(0, cm.horizon, f"u{d}")
        for s in stages:
            g = sc.dur(inst.sync[s])
            y = model.new_int_var(0, max(0, cm.horizon - g), f"y{s}")
            mbs = inst.stage_microbatches(s)
            if mbs and (op := OpId(kind, s, mbs[-1])) in present:  # type: ignore[arg-type]
                model.add(y >= cm.end(op))
            lane.append(model.new_fixed_size_interval_var(y, g, f"sync{s}"))
            model.add(step >= y + g)
            cm.sync_start[s] = y
        model.add_no_overlap(lane)
        for op in last.get(d, ([], []))[1]:
            model.add(step >= cm.end(op))
        cm.step_start[d] = step
        cm.step_end[d] = step + sc.dur(inst.optimizer[d])


def add_objective(cm: CpsatModel, lower: int, upper: int) -> None:
    """``Z`` = makespan or stage span, with ``lower <= Z <= upper`` (a valid bound and the incumbent);
    both end at the step's end when the tail is modelled."""
    model = cm.model
    z = model.new_int_var(max(0, lower), max(lower, upper), "Z")
    fl = device_first_last(cm)
    if cm.graph.step:
        add_step_tail(cm, fl)
    if cm.inst.objective == "stage_span":
        for d in sorted(fl):
            firsts, last = fl[d]
            ends = [cm.end(op) for op in last] + ([cm.step_end[d]] if d in cm.step_end else [])
            for end in ends:
                for first in firsts:  # Z >= max end - min start
                    model.add(z >= end - cm.start[first])
    else:
        for d in sorted(fl):
            for op in fl[d][1]:
                model.add(z >= cm.end(op) + cm.graph.tail.get(op, 0))
        for op, t in sorted(cm.graph.tail.items()):
            model.add(z >= cm.end(op) + t)
        for d in sorted(cm.step_end):
            model.add(z >= cm.step_end[d])
    model.minimize(z)
    cm.objective = z


# ---- 7. The whole model, family by family --------------------------------------------------------

def build(inst: Instance, sc: Scaling, graph: OpGraph, *, horizon: int, lower: int, upper: int) -> CpsatModel:
    """The whole model, built family by family."""
    cm = CpsatModel(inst, sc, graph, horizon)
    add_op_intervals(cm)
    add_device_no_overlap(cm)
    exact = add_schedule_rules(cm)
    capped = {d for d, stages in enumerate(inst.stages_of_device) if stages and math.isfinite(inst.limit[d])}
    cm.precedences_only = bool(capped) and capped <= exact
    add_objective(cm, lower, upper)
    return cm


def add_schedule_rules(cm: CpsatModel) -> frozenset[int]:
    """The precedences, the microbatch order and memory (shared with the model with F&B pairs, which has
    its own no-overlap); the devices whose memory caps the chains express exactly."""
    add_precedences(cm)
    add_microbatch_order(cm)
    exact = add_memory_chain(cm)
    add_memory(cm, skip=exact)
    return exact


# ---- 8. Read-back: a solution's per-device order (the caller re-times it exactly) ----------------

def solved_order(cm: CpsatModel, solver: cp_model.CpSolver) -> list[list[OpId]]:
    """Per-device order of a solution: by model start, ties by end, then the one tie-break
    (:func:`pipesched.solver.core.ops.dependency_rank`) the torch CSV and the runtime plan use too."""
    inst = cm.inst
    order: list[list[OpId]] = [[] for _ in range(inst.devices)]
    keyed = sorted(
        ((solver.value(x), solver.value(x) + cm.dur[op], dependency_rank(op, inst.num_stages), op.microbatch, op)
         for op, x in cm.start.items())
    )
    for *_, op in keyed:
        order[inst.device(op)].append(op)
    return order

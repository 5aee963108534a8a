"""The CP-SAT formulation with overlapped F&B pairs (``costs.overlap_fb``, docs/dualpipe.md §2).

Why a model of its own: in :mod:`.formulation` every op has a fixed length and runs alone, so with
pairs allowed its optimum would not be the problem's. Here each F and each B either runs alone or in
exactly one pair with an op of the other kind on its device; the families of constraints that only
read an op's start and end (precedences, microbatch order, memory, objective) are
:mod:`.formulation`'s own, given each op's end as a variable. Read top to bottom like it:
1. data (candidate pairs, integer units), 2. variables, 3. one op per pair or alone, 4. no overlap,
5. the whole model, 6. read-back.

Variables: per op ``o`` a start ``x_o`` and an end ``e_o``; per op a literal ``a_o`` (runs alone);
per candidate pair ``(f, b)`` a literal ``z_fb`` (runs as one overlapped op).

- exactly one:  ``a_o + sum_{pairs p of o} z_p = 1`` for every F and B (a W is always alone);
- alone:        ``a_o  =>  e_o = x_o + d_o``, interval ``[x_o, x_o + d_o)`` present iff ``a_o``;
- pair:         ``z_fb =>  x_b = x_f,  e_f = e_b = x_f + d_fb``, one interval ``[x_f, x_f + d_fb)``
  present iff ``z_fb`` (``d_fb = Instance.pair_cost(f, b)``);
- no overlap:   ``NoOverlap`` of every single and pair interval of each device;
- precedences, microbatch order, memory and objective as in :mod:`.formulation`, with ``e_o`` for
  ``x_o + d_o``. Memory events: a positive delta at ``x_o``, a negative one at ``e_o``: for a pair,
  F's (non-negative) delta from the pair's start and B's release at its end, which is how the
  validator walks a pair (F first); a problem whose forward delta is negative is refused.

Candidate pairs are an F and a B of different microbatches on one device (the two halves of one
microbatch depend on each other, so they can never start together), kept only when their start
windows can meet: each op's earliest start (longest path of least lengths from time 0, microbatch
order included) and latest start (the horizon minus the longest path of least lengths to the end)
must overlap. Every schedule no worse than the incumbent keeps its pairs, so the proof stands.

The microbatch order (symmetry breaking) survives pairs: the exchange argument of :mod:`.formulation`
relabels microbatches, and a pair's length and memory depend on its stages only.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from ...core.instance import Instance, OpId
from ...core.tolerance import slack
from .formulation import (
    CpsatModel,
    OpGraph,
    add_objective,
    add_schedule_rules,
)
from .scaling import MAX_SCALED_COST, Scaling

Pair = tuple[OpId, OpId]  # (F, B)


# ---- 1. Data: candidate pairs and integer units --------------------------------------------------

def paired_scaling(inst: Instance) -> Scaling:
    """:meth:`Scaling.of`, refined by powers of ten until every pair length is whole too (a pair lasts
    ``factor x (F + B)``, which the plain costs' resolution may not hold exactly)."""
    sc = Scaling.of(inst)
    lengths = [inst.pair_cost(OpId("F", s, 0), OpId("B", t, 0)) for d, stages in enumerate(inst.stages_of_device)
               for s in stages for t in stages]
    top = max([*lengths, 1e-9])
    time = sc.time
    while not all(abs(x * time - round(x * time)) <= slack(x * time) for x in lengths):
        if top * time * 10 > MAX_SCALED_COST:
            return dataclasses.replace(sc, time_exact=False)
        time *= 10
    return dataclasses.replace(sc, time=time)


def least_heads_tails(inst: Instance, sc: Scaling) -> tuple[dict[OpId, int], dict[OpId, int]]:
    """Per op, the least model time before its start and after its end in any schedule (longest paths
    over dependencies and microbatch order, each op at its own length: a pair is never shorter)."""
    ops = inst.ops()
    succ: dict[OpId, list[tuple[OpId, int]]] = {op: [] for op in ops}
    indeg = dict.fromkeys(ops, 0)
    present = set(ops)
    for op in ops:
        arcs = [(a, sc.dur(lag)) for a, lag in inst.predecessors(op)]
        prev = OpId(op.kind, op.stage, op.microbatch - 1)
        if prev in present:
            arcs.append((prev, 0))
        for a, lag in arcs:
            succ[a].append((op, lag))
            indeg[op] += 1
    topo, queue = [], [op for op in ops if indeg[op] == 0]
    while queue:
        op = queue.pop()
        topo.append(op)
        for nxt, _ in succ[op]:
            indeg[nxt] -= 1
            if indeg[nxt] == 0:
                queue.append(nxt)
    d = {op: sc.dur(inst.cost(op)) for op in ops}
    head = dict.fromkeys(ops, 0)
    for op in topo:
        for nxt, lag in succ[op]:
            head[nxt] = max(head[nxt], head[op] + d[op] + lag)
    tail = dict.fromkeys(ops, 0)
    for op in reversed(topo):
        for nxt, lag in succ[op]:
            tail[op] = max(tail[op], lag + d[nxt] + tail[nxt])
    return head, tail


def candidate_pairs(inst: Instance, sc: Scaling, horizon: int | None = None) -> list[Pair]:
    """The (F, B) pairs of the model (module docstring): one device, different microbatches, start
    windows that meet (``horizon`` None: no latest start, every such pair)."""
    head, tail = least_heads_tails(inst, sc)

    def latest(op: OpId) -> float:
        return math.inf if horizon is None else horizon - tail[op] - sc.dur(inst.cost(op))

    per: dict[int, tuple[list[OpId], list[OpId]]] = {}
    for op in inst.ops():
        if op.kind in ("F", "B"):
            per.setdefault(inst.device(op), ([], []))[op.kind == "B"].append(op)
    out = []
    for d in sorted(per):
        fs, bs = per[d]
        for f in fs:
            for b in bs:
                if f.microbatch != b.microbatch and max(head[f], head[b]) <= min(latest(f), latest(b)):
                    out.append((f, b))
    return out


@dataclass
class PairedModel(CpsatModel):
    """:class:`CpsatModel` whose op ends are variables, with the alone and pair literals."""

    pairs: list[Pair] = field(default_factory=list)
    end_var: dict[OpId, cp_model.IntVar] = field(default_factory=dict)
    alone: dict[OpId, cp_model.IntVar] = field(default_factory=dict)
    paired: dict[Pair, cp_model.IntVar] = field(default_factory=dict)
    device_intervals: dict[int, list[cp_model.IntervalVar]] = field(default_factory=dict)

    def end(self, op: OpId) -> cp_model.LinearExprT:
        return self.end_var[op]


# ---- 2. Variables: x_o, e_o, a_o and the op's optional interval [x_o, x_o + d_o) -----------------
# a_o => e_o = x_o + d_o;  d_o <= e_o - x_o <= longest pair of o

def add_op_variables(cm: PairedModel) -> None:
    longest: dict[OpId, int] = {}
    for f, b in cm.pairs:
        length = cm.sc.dur(cm.inst.pair_cost(f, b))
        longest[f], longest[b] = max(longest.get(f, 0), length), max(longest.get(b, 0), length)
    for op in cm.graph.ops:
        d = cm.sc.dur(cm.inst.cost(op))
        top = max(d, longest.get(op, d))
        name = f"{op.kind}{op.stage}_{op.microbatch}"
        x = cm.model.new_int_var(0, max(0, cm.horizon - d), "x" + name)
        e = cm.model.new_int_var(d, max(d, cm.horizon), "e" + name)
        cm.model.add(e >= x + d)
        cm.model.add(e <= x + top)
        a = cm.model.new_bool_var("a" + name)
        cm.model.add(e == x + d).only_enforce_if(a)
        cm.start[op], cm.dur[op], cm.end_var[op], cm.alone[op] = x, d, e, a
        cm.interval[op] = cm.model.new_optional_fixed_size_interval_var(x, d, a, "i" + name)
        cm.device_intervals.setdefault(cm.inst.device(op), []).append(cm.interval[op])


# ---- 3. One op per pair or alone: z_fb => x_b = x_f, e_f = e_b = x_f + d_fb; a_o + sum z = 1 ----

def add_pairs(cm: PairedModel) -> None:
    members: dict[OpId, list[cp_model.IntVar]] = {}
    for f, b in cm.pairs:
        z = cm.model.new_bool_var(f"z{f.stage}_{f.microbatch}_{b.stage}_{b.microbatch}")
        length = cm.sc.dur(cm.inst.pair_cost(f, b))
        x = cm.start[f]
        cm.model.add(cm.start[b] == x).only_enforce_if(z)
        cm.model.add(cm.end_var[f] == x + length).only_enforce_if(z)
        cm.model.add(cm.end_var[b] == x + length).only_enforce_if(z)
        cm.paired[(f, b)] = z
        cm.device_intervals[cm.inst.device(f)].append(
            cm.model.new_optional_fixed_size_interval_var(x, length, z, f"p{f}{b}"))
        members.setdefault(f, []).append(z)
        members.setdefault(b, []).append(z)
    for op, a in cm.alone.items():
        cm.model.add_exactly_one([a, *members.get(op, [])])


# ---- 4. No overlap: NoOverlap of the singles and pairs of each device ---------------------------

def add_device_no_overlap(cm: PairedModel) -> None:
    for d in sorted(cm.device_intervals):
        cm.model.add_no_overlap(cm.device_intervals[d])


# ---- 5. The whole model --------------------------------------------------------------------------

def build_paired(inst: Instance, sc: Scaling, pairs: list[Pair], *, horizon: int, lower: int,
                 upper: int) -> PairedModel:
    """The whole model, family by family (precedences to objective from :mod:`.formulation`)."""
    cm = PairedModel(inst, sc, OpGraph.full(inst, sc), horizon, pairs=pairs)
    add_op_variables(cm)
    add_pairs(cm)
    add_device_no_overlap(cm)
    add_schedule_rules(cm)
    add_objective(cm, lower, upper)
    return cm


# ---- 6. Read-back: per-device order (a pair's F first, then its B) and the pairs -----------------

def paired_solution(cm: PairedModel, solver: cp_model.CpSolver) -> tuple[list[list[OpId]], list[Pair], dict[OpId, int]]:
    """The solution's per-device order, its pairs and its start times (model units)."""
    chosen = [p for p, z in cm.paired.items() if solver.boolean_value(z)]
    partner = {b: f for f, b in chosen}
    start = {op: solver.value(x) for op, x in cm.start.items()}
    order: list[list[OpId]] = [[] for _ in range(cm.inst.devices)]
    rank = {"F": 0, "B": 1, "W": 2}
    for op in sorted(cm.start, key=lambda o: (start[o], solver.value(cm.end_var[o]), o in partner, rank[o.kind], o)):
        order[cm.inst.device(op)].append(op)
    for ops in order:  # a pair's B straight after its F (a zero-length op may sort between them)
        for b, f in partner.items():
            if b in ops and f in ops:
                ops.remove(b)
                ops.insert(ops.index(f) + 1, b)
    return order, chosen, start

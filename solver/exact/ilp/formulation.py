"""The ILP's disjunctive mixed-integer formulation, built with PuLP, one function per family.

Read it next to the maths. For ops ``a, b`` on one device, ``d`` = duration, ``δ`` = memory delta:

- time: a start ``x_a >= 0`` per op, inside its window ``[ES_a, LS_a]`` (longest paths from time 0
  and to the horizon ``H``) — :func:`add_time_variables`;
- order: one binary ``y_ab`` per pair on a device (``y_ba = 1 - y_ab``: a runs before b), fixed
  to a constant wherever the answer is known (:func:`fixed_orders`) — :func:`add_order_binaries`;
- no overlap, big-M: ``x_b >= x_a + d_a - M_ab (1 - y_ab)`` with the tightest valid
  ``M_ab = LS_a + d_a - ES_b`` — :func:`add_no_overlap`;
- precedences with comm: ``x_b >= x_a + d_a + lag(a, b)`` — :func:`add_precedences`;
- memory at each op start: a positive delta takes effect at the op's start, a negative one at its
  end, and ops on a device never overlap, so when ``j`` starts every op before it has run
  completely (both its effects happened) and none after it has begun. The live memory just after
  ``j`` starts is therefore ``Σ_i δ_i y_ij + max(δ_j, 0)``; memory only rises at starts of ops
  with ``δ > 0``, so ``δ_j + Σ_i δ_i y_ij <= limit_d`` for those ``j`` bounds it at all times —
  :func:`add_memory`;
- objective ``Z``: makespan ``Z >= x_j + d_j`` for ops without successors; or stage span
  ``Z >= l_d - f_d`` with ``f_d <= x_j <= x_j + d_j <= l_d`` on device ``d`` — :func:`add_objective`;
- device load (valid inequalities): ops before ``j`` fit between the device's start and ``x_j``,
  ops after it between ``x_j + d_j`` and the device's end — :func:`add_device_load_cuts`;
- zero-length ops: no 3-cycles of order among them — :func:`add_zero_length_transitivity`;
- the step's tail (gradient syncs, optimizer) — :mod:`.step`.

The method around it (warm start, horizon, reading back, status) is :mod:`.method`;
the solvers are run by :mod:`.backends`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from ...core.instance import Instance, OpId
from ...core.metrics import objective_value
from ...core.schedule import Order
from ...core.tolerance import slack
from .model import IlpModel, new_var, pulp
from .step import add_step_tail, step_warm_start


def _topological(inst: Instance, ops: Sequence[OpId]) -> list[OpId]:
    """Ops sorted so that every dependency and every microbatch-order edge goes forward.

    Key (microbatch, position along the chain F(0..S-1), B(S-1..0), W after its B).
    """
    stages = inst.num_stages

    def pos(op: OpId) -> int:
        return {"F": op.stage, "B": 2 * stages - 1 - op.stage, "W": 2 * stages - op.stage}[op.kind]

    return sorted(ops, key=lambda op: (op.microbatch, pos(op), op.kind))


def time_windows(inst: Instance, horizon: float) -> tuple[dict[OpId, float], dict[OpId, float]]:
    """Earliest start ``ES`` (longest path from 0) and latest start ``LS = H - d - tail``."""
    topo = _topological(inst, inst.ops())
    es: dict[OpId, float] = {}
    for op in topo:
        es[op] = max((es[p] + inst.cost(p) + lag for p, lag in inst.predecessors(op)), default=0.0)
    tail: dict[OpId, float] = {}
    for op in reversed(topo):
        tail[op] = max((lag + inst.cost(s) + tail[s] for s, lag in inst.successors(op)), default=0.0)
    ls = {op: horizon - inst.cost(op) - tail[op] for op in topo}
    return es, ls


def fixed_orders(
    inst: Instance, ops: Sequence[OpId], es: Mapping[OpId, float], ls: Mapping[OpId, float], horizon: float
) -> dict[tuple[OpId, OpId], int]:
    """Pairs on one device whose order is known before solving: 1 when the first runs first.

    1. Symmetry breaking — microbatch order per stage and kind: X(s, i) before X(s, i + 1). Valid
       with memory: take any feasible schedule and, for each (kind, stage), give the i-th earliest
       start time among its m ops to microbatch i. Ops of one (kind, stage) have equal durations
       and deltas, so every device runs the same set of intervals with the same deltas (same
       memory profile, no new overlap, same objective). Each dependency links (kind, stage) to
       (kind', stage') microbatch by microbatch with one constant lag, and "a_i >= b_i + c for all
       i" implies the same for the i-th smallest of each side; so precedences still hold.
    2. Dependencies: a reaches b through dependencies and the orders of 1 (transitive closure).
    3. Time windows: a must end before b can start (``LS_a + d_a < ES_b``), with a margin so
       that zero-length ops at the same instant, whose order matters for memory, stay free.
    """
    topo = _topological(inst, ops)
    succ: dict[OpId, list[OpId]] = {op: [s for s, _ in inst.successors(op)] for op in topo}
    for op in topo:
        if op.microbatch + 1 in inst.stage_microbatches(op.stage):
            succ[op].append(OpId(op.kind, op.stage, op.microbatch + 1))
    bit = {op: 1 << k for k, op in enumerate(topo)}
    reach: dict[OpId, int] = {}
    for op in reversed(topo):
        r = 0
        for s in succ[op]:
            r |= bit[s] | reach[s]
        reach[op] = r
    index = {op: k for k, op in enumerate(ops)}
    margin = slack(horizon)
    fixed: dict[tuple[OpId, OpId], int] = {}
    per_device: list[list[OpId]] = [[] for _ in range(inst.devices)]
    for op in ops:
        per_device[inst.device(op)].append(op)
    for dev_ops in per_device:
        for x, a in enumerate(dev_ops):
            for b in dev_ops[x + 1 :]:
                assert index[a] < index[b]
                if reach[a] & bit[b]:
                    fixed[(a, b)] = 1
                elif reach[b] & bit[a]:
                    fixed[(a, b)] = 0
                elif ls[a] + inst.cost(a) < es[b] - margin:
                    fixed[(a, b)] = 1
                elif ls[b] + inst.cost(b) < es[a] - margin:
                    fixed[(a, b)] = 0
    return fixed


def add_time_variables(model: IlpModel) -> None:
    """``ES_a <= x_a <= LS_a``; F(0, 0) starts at 0 (shift any schedule: it is the first op)."""
    for k, op in enumerate(model.ops):
        lo, hi = model.es[op], max(model.es[op], model.ls[op])
        if op == OpId("F", 0, 0):
            hi = lo = 0.0
        model.start[op] = new_var(model.prob, f"x{k}", lo, hi)


def add_order_binaries(model: IlpModel, fixed: Mapping[tuple[OpId, OpId], int]) -> None:
    """``y_ab`` for every pair on a device; a constant where :func:`fixed_orders` knows it."""
    index = {op: k for k, op in enumerate(model.ops)}
    for dev_ops in model.device_ops():
        for x, a in enumerate(dev_ops):
            for b in dev_ops[x + 1 :]:
                known = fixed.get((a, b))
                model.pair[(a, b)] = (
                    known if known is not None else new_var(model.prob, f"y{index[a]}_{index[b]}", 0, 1, "Binary")
                )


def add_no_overlap(model: IlpModel) -> None:
    """Big-M disjunction ``x_b >= x_a + d_a - M_ab (1 - y_ab)``, ``M_ab = LS_a + d_a - ES_b``."""
    inst, x = model.inst, model.start
    for (a, b), y in model.pair.items():
        if isinstance(y, int):
            first, second = (a, b) if y == 1 else (b, a)
            model.prob += x[second] >= x[first] + inst.cost(first)
            continue
        m_ab = max(0.0, model.ls[a] + inst.cost(a) - model.es[b])
        m_ba = max(0.0, model.ls[b] + inst.cost(b) - model.es[a])
        model.prob += x[b] >= x[a] + inst.cost(a) - m_ab * (1 - y)
        model.prob += x[a] >= x[b] + inst.cost(b) - m_ba * y


def add_zero_length_transitivity(model: IlpModel) -> None:
    """No order cycles among zero-length ops.

    With positive durations the big-M rows already forbid a cycle a<b<c<a (its durations would
    sum to <= 0); ops of length 0 can share one instant, and their order still decides memory,
    so forbid 3-cycles explicitly: ``y_ab + y_bc + y_ca <= 2`` (a tournament without 3-cycles
    is a total order).
    """
    for dev_ops in model.device_ops():
        zero = [op for op in dev_ops if model.inst.cost(op) == 0]
        for i, a in enumerate(zero):
            for j in range(i + 1, len(zero)):
                b = zero[j]
                for c in zero[j + 1 :]:
                    ab, bc, ac = model.before(a, b), model.before(b, c), model.before(a, c)
                    if all(isinstance(t, int) for t in (ab, bc, ac)):
                        continue
                    model.prob += ab + bc + (1 - ac) <= 2
                    model.prob += (1 - ab) + (1 - bc) + ac <= 2


def add_precedences(model: IlpModel) -> None:
    """``x_b >= x_a + d_a + lag`` for every dependency a -> b (lag = comm across devices)."""
    inst, x = model.inst, model.start
    for op in model.ops:
        for pred, lag in inst.predecessors(op):
            model.prob += x[op] >= x[pred] + inst.cost(pred) + lag


def add_memory(model: IlpModel) -> None:
    """``δ_j + Σ_i δ_i y_ij <= limit_d`` at the start of every op j with ``δ_j > 0``."""
    inst = model.inst
    for d, dev_ops in enumerate(model.device_ops()):
        cap = inst.limit[d]
        if math.isinf(cap):
            continue
        for j in dev_ops:
            if inst.mem(j) <= 0:
                continue
            live = pulp.lpSum(inst.mem(i) * model.before(i, j) for i in dev_ops if i != j and inst.mem(i) != 0)
            model.prob += live + inst.mem(j) <= cap


def add_device_load_cuts(model: IlpModel) -> None:
    """Valid inequalities that make the LP relaxation see each device's load.

    Every op before ``j`` on its device runs between the device's earliest possible start
    ``h_d = min ES`` and ``x_j``, and every op after ``j`` between ``x_j + d_j`` and the device's
    last end ``e_d``; they never overlap, so ``x_j >= h_d + Σ_i d_i y_ij`` and
    ``e_d >= x_j + d_j + Σ_i d_i y_ji``. With ``e_d`` = ``l_d`` (stage span) or ``Z - min tail``
    (makespan), and ``f_d`` for ``h_d`` under stage span. Big-M rows alone leave the relaxation
    blind to load (any fractional ``y`` lets ops overlap), which is what makes them slow.
    """
    inst, x = model.inst, model.start
    for d, dev_ops in enumerate(model.device_ops()):
        if not dev_ops:
            continue
        head = min(model.es[op] for op in dev_ops)
        tail = min(model.horizon - model.ls[op] - inst.cost(op) for op in dev_ops)
        for j in dev_ops:
            before = pulp.lpSum(inst.cost(i) * model.before(i, j) for i in dev_ops if i != j and inst.cost(i))
            after = pulp.lpSum(inst.cost(i) * model.before(j, i) for i in dev_ops if i != j and inst.cost(i))
            if inst.objective == "stage_span":
                model.prob += x[j] >= model.first[d] + before
                model.prob += model.last[d] >= x[j] + inst.cost(j) + after
            else:
                assert model.objective is not None
                model.prob += x[j] >= head + before
                model.prob += model.objective >= x[j] + inst.cost(j) + after + max(0.0, tail)


def add_objective(model: IlpModel, lower: float, upper: float) -> None:
    """Minimise ``Z`` within ``[lower, upper]`` (analytic bound, heuristic objective)."""
    inst, x = model.inst, model.start
    z = new_var(model.prob, "z", lower, max(lower, upper))
    model.objective = z
    model.prob += z
    if inst.objective == "makespan":
        for op in model.ops:
            if not inst.successors(op):
                model.prob += z >= x[op] + inst.cost(op)
        return
    # stage span: only ops with no known predecessor (successor) on the device can be first (last)
    has_pred: set[OpId] = set()
    has_succ: set[OpId] = set()
    for (a, b), y in model.pair.items():
        if isinstance(y, int):
            first, second = (a, b) if y == 1 else (b, a)
            has_succ.add(first)
            has_pred.add(second)
    for d, dev_ops in enumerate(model.device_ops()):
        if not dev_ops:
            continue
        f = model.first[d] = new_var(model.prob, f"f{d}", 0, model.horizon)
        ell = model.last[d] = new_var(model.prob, f"l{d}", 0, model.horizon)
        for op in dev_ops:
            if op not in has_pred:
                model.prob += f <= x[op]
            if op not in has_succ:
                model.prob += ell >= x[op] + inst.cost(op)
        model.prob += z >= ell - f


def build_model(inst: Instance, horizon: float, lower: float, upper: float) -> IlpModel:
    """Every family of constraints above, for schedules ending by ``horizon``."""
    es, ls = time_windows(inst, horizon)
    ops = inst.ops()
    model = IlpModel(inst, horizon, pulp.LpProblem("pipesched", pulp.LpMinimize), ops, es, ls)
    add_time_variables(model)
    add_order_binaries(model, fixed_orders(inst, ops, es, ls, horizon))
    add_no_overlap(model)
    add_zero_length_transitivity(model)
    add_precedences(model)
    add_memory(model)
    add_objective(model, lower, upper)
    add_step_tail(model)
    add_device_load_cuts(model)
    return model


def canonical_times(inst: Instance, start: Mapping[OpId, float]) -> dict[OpId, float]:
    """Relabel microbatches so each (kind, stage) runs in microbatch order, then start at 0.

    The relabelling of :func:`fixed_orders` (i-th earliest start to microbatch i): a valid
    schedule stays valid with the same objective and now satisfies the symmetry breaking.
    """
    out: dict[OpId, float] = {}
    for kind in inst.kinds:
        for s in range(inst.num_stages):
            mbs = inst.stage_microbatches(s)  # dual: only the microbatches of the stage's copy
            times = sorted(start[OpId(kind, s, i)] for i in mbs)
            for i, t in zip(mbs, times, strict=True):
                out[OpId(kind, s, i)] = t
    shift = min(out.values())  # F(0, 0) when every microbatch starts at stage 0
    return {op: t - shift for op, t in out.items()}


def order_of(inst: Instance, start: Mapping[OpId, float]) -> Order:
    order: Order = [[] for _ in range(inst.devices)]
    for op in sorted(start, key=lambda o: (start[o], start[o] + inst.cost(o), o)):
        order[inst.device(op)].append(op)
    return order


def set_warm_start(model: IlpModel, start: Mapping[OpId, float]) -> dict[str, float]:
    """Give every variable its value in ``start``; returns them by name (for HiGHS)."""
    inst = model.inst
    values: dict[str, float] = {}

    def put(var: pulp.LpVariable, value: float) -> None:
        # A start rebuilt from float sums can sit an ulp outside the bound the model derived from the
        # same costs (17.799999999999997 < 17.8): PuLP refuses such a value, so snap it inside.
        low, high = var.lowBound, var.upBound
        if low is not None and low - slack(low) <= value < low:
            value = low
        if high is not None and high < value <= high + slack(high):
            value = high
        var.setInitialValue(value)
        values[var.name] = value

    for op, var in model.start.items():
        put(var, start[op])
    rank = {op: k for ops in order_of(inst, start) for k, op in enumerate(ops)}
    for (a, b), y in model.pair.items():
        if not isinstance(y, int):
            put(y, 1.0 if rank[a] < rank[b] else 0.0)
    for d, ops in enumerate(order_of(inst, start)):
        if d in model.first:
            put(model.first[d], start[ops[0]])
            put(model.last[d], max(start[o] + inst.cost(o) for o in ops))
    step_warm_start(model, start, put)
    assert model.objective is not None
    put(model.objective, objective_value(inst, start))
    return values


def order_from_solution(model: IlpModel, value: Callable[[str], float]) -> Order:
    """Per-device order from the binaries: op j's position is how many ops precede it.

    A transitive tournament gives distinct positions; if the solver's tolerances left ties,
    the start times break them.
    """
    order: Order = []
    for dev_ops in model.device_ops():
        rank = {op: 0 for op in dev_ops}
        for (a, b), y in model.pair.items():
            if a not in rank:
                continue
            a_first = y == 1 if isinstance(y, int) else value(y.name) > 0.5
            rank[b if a_first else a] += 1
        order.append(sorted(dev_ops, key=lambda op: (rank[op], value(model.start[op].name), op)))
    return order

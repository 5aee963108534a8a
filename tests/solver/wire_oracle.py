"""A test oracle built from the wire format alone: the op graph, an exact optimum, a validator.

The solver turns a :class:`Problem` into its ``Instance`` (dependencies, memory deltas, limits) and
every method, bound and the validator read that. An oracle built on the same ``Instance`` would share
any mistake in it, so this module reads the problem's JSON fields (``problem.model_dump()``, the
documented wire format of docs/problem.md) and nothing else of ``pipesched.solver``:

- :func:`graph`: ops ``F/B/W(stage, microbatch)``, their device, duration, memory delta and B's
  transient, and the dependencies with their comm lag, as exact fractions of the decimal inputs.
- :func:`optimum`: the least objective over all schedules, from a CP-SAT model written here
  (interval per op, no overlap per device, precedences with lags, a reservoir per device for
  memory: a positive delta or a transient taken at the op's start, a negative delta or the
  transient given back at its end). Times are scaled to integers exactly; for ``stage_span`` also by
  ``lcm(1..p)``, since the optimum of a fixed order is a cycle mean over at most ``p`` devices.
  It must prove its answer or it raises.
- :func:`violations`: every broken rule of a schedule and its objective, recomputed here.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, NamedTuple

from ortools.sat.python import cp_model

from pipesched.solver import Problem

#: Largest scaled integer the exact model accepts (CP-SAT works in int64; sums must stay inside).
MAX_SCALED = 2**40
TOL = 1e-6


class Op(NamedTuple):
    kind: str  # "F", "B" or "W"
    stage: int
    microbatch: int

    def __str__(self) -> str:
        return f"{self.kind}({self.stage}, {self.microbatch})"


def _exact(x: float) -> Fraction:
    """The decimal a JSON number was written as (0.1 -> 1/10), not its binary float."""
    return Fraction(repr(float(x)))


def _per_stage(value: Any, n: int) -> list[Fraction]:
    return [_exact(x) for x in value] if isinstance(value, list) else [_exact(value)] * n


@dataclass(frozen=True)
class Graph:
    """The ops of a problem and everything a schedule of them must respect, read from its JSON."""

    devices: int
    num_stages: int  # stage ids (2p under "dual")
    objective: str
    order: tuple[Op, ...]
    device_of: dict[Op, int]
    duration: dict[Op, Fraction]
    delta: dict[Op, Fraction]
    transient: dict[Op, Fraction]
    preds: dict[Op, tuple[tuple[Op, Fraction], ...]]
    limits: tuple[Fraction | None, ...]  # per device; None: no cap

    # the names tests/solver/bruteforce.py reads (floats)
    def ops(self) -> list[Op]:
        return list(self.order)

    def device(self, op: Op) -> int:
        return self.device_of[op]

    def cost(self, op: Op) -> float:
        return float(self.duration[op])

    def need(self, op: Op) -> float:
        """Memory the op adds while it runs on top of what its device holds: its positive delta plus
        B's transient."""
        return float(max(self.delta[op], Fraction(0)) + self.transient[op])

    def mem(self, op: Op) -> float:
        return float(self.delta[op])

    def predecessors(self, op: Op) -> list[tuple[Op, float]]:
        return [(a, float(lag)) for a, lag in self.preds[op]]

    @property
    def limit(self) -> list[float]:
        return [math.inf if x is None else float(x) for x in self.limits]


def graph(problem: Problem) -> Graph:
    """docs/problem.md, read literally: stage ``s`` on device ``s % p`` (loop) or the V fold (``v`` and
    ``dual``); under ``dual`` ids ``p..2p-1`` are the upward copy of model stages ``0..p-1`` and the
    first ``dual_split`` microbatches (default ``m // 2``) flow down, the rest up. F(s) after
    F(s-1), B(last) after F(last), B(s) after B(s+1), W(s) after B(s), each with the boundary's comm
    when the two stages sit on different devices. Fused backward: one B with B's and W's durations
    and deltas summed."""
    d = problem.model_dump(mode="json")
    p, m, v, placement = d["devices"], d["microbatches"], d["stages_per_device"], d["placement"]
    costs, memory = d["costs"], d["memory"]
    if costs.get("overlap_fb") is not None:
        raise NotImplementedError("wire_oracle: overlapped F&B (costs.overlap_fb) is not modelled")
    tail = [costs.get(k, 0.0) for k in ("grad_sync", "optimizer")]
    if any(any(x) if isinstance(x, list) else x for x in tail):
        raise NotImplementedError("wire_oracle: a step tail (costs.grad_sync, costs.optimizer) is not modelled")
    dual = placement == "dual"
    stages = 2 * p if dual else p * v
    model_stages = p if dual else stages

    def device_of_stage(s: int) -> int:
        return (s if s < p else 2 * p - 1 - s) if placement in ("v", "dual") else s % p

    def model_stage(s: int) -> int:
        return s - p if dual and s >= p else s

    f, b, w = (_per_stage(costs[k], model_stages) for k in ("forward", "backward_input", "backward_weight"))
    df, db, dw = (_per_stage(memory[k], model_stages) for k in ("forward", "backward_input", "backward_weight"))
    tb = _per_stage(memory.get("backward_input_transient", 0.0), model_stages)
    comm = costs["comm"]
    comms = _per_stage(comm, model_stages - 1) if isinstance(comm, list) else [_exact(comm)] * max(0, model_stages - 1)
    split = d["split_backward"]
    down = (m // 2 if d.get("dual_split") is None else d["dual_split"]) if dual else m

    def copy(s: int) -> tuple[int, int, range]:
        """First and last stage id of the copy holding ``s``, and its microbatches."""
        if not dual:
            return 0, stages - 1, range(m)
        return (0, p - 1, range(down)) if s < p else (p, 2 * p - 1, range(down, m))

    def lag(a: int, c: int) -> Fraction:
        return Fraction(0) if device_of_stage(a) == device_of_stage(c) else comms[model_stage(min(a, c))]

    order: list[Op] = []
    device_of, duration, delta, transient, preds = {}, {}, {}, {}, {}
    for s in range(stages):
        first, last, mbs = copy(s)
        k = model_stage(s)
        for i in mbs:
            ops = {"F": Op("F", s, i), "B": Op("B", s, i)}
            if split:
                ops["W"] = Op("W", s, i)
            for op in ops.values():
                order.append(op)
                device_of[op] = device_of_stage(s)
                transient[op] = tb[k] if op.kind == "B" else Fraction(0)
            duration[ops["F"]], delta[ops["F"]] = f[k], df[k]
            duration[ops["B"]] = b[k] if split else b[k] + w[k]
            delta[ops["B"]] = db[k] if split else db[k] + dw[k]
            if split:
                duration[ops["W"]], delta[ops["W"]] = w[k], dw[k]
                preds[ops["W"]] = ((ops["B"], Fraction(0)),)
            preds[ops["F"]] = ((Op("F", s - 1, i), lag(s - 1, s)),) if s > first else ()
            preds[ops["B"]] = ((ops["F"], Fraction(0)),) if s == last else ((Op("B", s + 1, i), lag(s + 1, s)),)
    limit = memory["limit"]
    limits = (tuple(_exact(x) for x in limit) if isinstance(limit, list)
              else (None if limit is None else _exact(limit),) * p)
    return Graph(p, stages, d["objective"], tuple(order), device_of, duration, delta, transient, preds, limits)


def _scale(values: list[Fraction], extra: int = 1) -> int:
    scale = extra
    for x in values:
        scale = math.lcm(scale, x.denominator)
    return scale


def _ints(values: dict[Op, Fraction], scale: int) -> dict[Op, int]:
    out = {op: int(x * scale) for op, x in values.items()}
    if any(abs(x) > MAX_SCALED for x in out.values()):
        raise ValueError(f"wire_oracle: scaling by {scale} leaves numbers above {MAX_SCALED}")
    return out


@functools.cache
def _optimum(problem_json: str) -> float | None:
    g = graph(Problem.model_validate_json(problem_json))
    lags = [lag for ps in g.preds.values() for _, lag in ps]
    span = g.objective == "stage_span"
    t_scale = _scale([*g.duration.values(), *lags], math.lcm(*range(1, g.devices + 1)) if span else 1)
    m_scale = _scale([*g.delta.values(), *g.transient.values(), *(x for x in g.limits if x is not None)])
    dur, delta, trans = _ints(g.duration, t_scale), _ints(g.delta, m_scale), _ints(g.transient, m_scale)
    horizon = sum(dur.values()) + sum(int(lag * t_scale) for lag in lags)  # a left-shifted order fits in it

    model = cp_model.CpModel()
    # variables: one interval per op
    start = {op: model.NewIntVar(0, horizon, f"s{op}") for op in g.order}
    end = {op: model.NewIntVar(0, horizon, f"e{op}") for op in g.order}
    intervals = {op: model.NewIntervalVar(start[op], dur[op], end[op], f"i{op}") for op in g.order}
    # precedences: after each predecessor's end and the comm lag
    for op in g.order:
        for a, lag in g.preds[op]:
            model.Add(start[op] >= end[a] + int(lag * t_scale))
    # one op at a time per device
    on = [[op for op in g.order if g.device_of[op] == dev] for dev in range(g.devices)]
    for ops in on:
        model.AddNoOverlap([intervals[op] for op in ops])
    # memory: taken at the start, given back at the end
    for dev, ops in enumerate(on):
        if g.limits[dev] is None:
            continue
        times, changes = [], []
        for op in ops:
            for t, change in ((start[op], max(delta[op], 0) + trans[op]), (end[op], min(delta[op], 0) - trans[op])):
                if change:
                    times.append(t)
                    changes.append(change)
        if times:
            floor = -sum(abs(c) for c in changes)
            model.AddReservoirConstraint(times, changes, floor, int(g.limits[dev] * m_scale))
    # symmetry: equal microbatches enter each copy's first stage in index order
    firsts = sorted((op for op in g.order if op.kind == "F" and not g.preds[op]), key=lambda op: (op.stage, op.microbatch))
    for a, c in zip(firsts, firsts[1:], strict=False):
        if a.stage == c.stage:
            model.Add(start[a] <= start[c])
    # objective
    z = model.NewIntVar(0, horizon, "z")
    if span:
        for ops in on:
            if ops:
                first, last = model.NewIntVar(0, horizon, ""), model.NewIntVar(0, horizon, "")
                for op in ops:
                    model.Add(first <= start[op])
                    model.Add(last >= end[op])
                model.Add(z >= last - first)
    else:
        for op in g.order:
            model.Add(z >= end[op])
    model.Minimize(z)

    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 2
    solver.parameters.max_time_in_seconds = 120.0
    status = solver.Solve(model)
    if status == cp_model.INFEASIBLE:
        return None
    if status != cp_model.OPTIMAL:
        raise AssertionError(f"wire_oracle: CP-SAT did not prove an optimum ({solver.StatusName(status)})")
    return float(Fraction(solver.Value(z), t_scale))


def optimum(problem: Problem) -> float | None:
    """The least objective value over all schedules of ``problem`` (None: no schedule fits the caps);
    computed once per problem in a process."""
    return _optimum(problem.model_dump_json())


def violations(problem: Problem, ops: list[Any], objective: float | None) -> list[str]:
    """Every way ``ops`` (objects with device, stage, kind, microbatch, start, end) break the problem,
    and a reported ``objective`` that is not theirs."""
    g = graph(problem)
    got = {Op(o.kind, o.stage, o.microbatch): o for o in ops}
    errors = [f"missing {op}" for op in g.order if op not in got] + [f"extra {op}" for op in got if op not in g.device_of]
    if errors:
        return errors
    for op, o in got.items():
        if o.device != g.device_of[op]:
            errors.append(f"{op} on device {o.device}, not {g.device_of[op]}")
        if abs(o.end - o.start - float(g.duration[op])) > TOL * max(1.0, float(g.duration[op])):
            errors.append(f"{op} lasts {o.end - o.start}, not {float(g.duration[op])}")
        if o.start < -TOL:
            errors.append(f"{op} starts at {o.start} < 0")
        for a, lag in g.preds[op]:
            if got[a].end + float(lag) > o.start + TOL * max(1.0, o.start):
                errors.append(f"{op} starts at {o.start}, before {a} ends ({got[a].end}) + lag {float(lag)}")
    spans = []
    for dev in range(g.devices):
        mine = sorted((o for op, o in got.items() if g.device_of[op] == dev), key=lambda o: (o.start, o.end))
        for a, c in zip(mine, mine[1:], strict=False):
            if c.start < a.end - TOL * max(1.0, a.end):
                errors.append(f"device {dev}: {Op(a.kind, a.stage, a.microbatch)} and {Op(c.kind, c.stage, c.microbatch)} overlap")
        live = peak = 0.0
        for o in mine:  # one op at a time: its start after the previous op's releases
            op = Op(o.kind, o.stage, o.microbatch)
            peak = max(peak, live + g.need(op))
            live += g.mem(op)
        if g.limits[dev] is not None and peak > float(g.limits[dev]) * (1 + TOL) + TOL:
            errors.append(f"device {dev}: peak memory {peak} above the limit {float(g.limits[dev])}")
        if mine:
            spans.append(max(o.end for o in mine) - min(o.start for o in mine))
    value = max(spans) if g.objective == "stage_span" else max(o.end for o in got.values())
    if objective is None or abs(objective - value) > TOL * max(1.0, value):
        errors.append(f"objective reported {objective}, the ops give {value}")
    return errors

"""What the replays' timelines say about the p = 4 misses: each op's measured slowdown against how
many ranks really computed at once, and how long a rank took to start an op after its input's
producer ended on another rank (the hand-off).

Why: the prediction re-times the order with a calibrated slowdown per count of busy ranks
(``runtime/profiling/contention.py``). When ranks outnumber cores it under-predicted by 10-19%, and the table
could not say whether the ops ran slower than the curve says (the calibration), or the ranks lost
time between ops (a rank woken by its input waiting for a core). Every rank records each step's
start on the machine's monotonic clock (``replay_rank``'s ``steps``), so the ranks' ops line up.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from pipesched.solver import Problem

#: Ops shorter than this alone (ms) are left out: their ratio is mostly timer and dispatch noise.
MIN_OP_MS = 1.0

Op = tuple[str, int, int]  # kind, stage, microbatch


def _intervals(ranks: list[dict]) -> dict[int, list[tuple[int, Op, float, float, float]]]:
    """Per step index: (rank, op, wait, start, end) of every rank's ops, absolute seconds."""
    steps: dict[int, list] = defaultdict(list)
    for rank, r in enumerate(ranks):
        for s, (t0, timeline) in enumerate(r["steps"]):
            for kind, stage, mb, wait, start, end, _cpu in timeline:
                steps[s].append((rank, (kind, stage, mb), t0 + wait, t0 + start, t0 + end))
    return steps


def _busy_ranks(start: float, end: float, spans: list[tuple[float, float]]) -> float:
    """Time-averaged count of ``spans`` (compute intervals of all ranks, this op's included) covering
    ``[start, end]``."""
    if end <= start:
        return 1.0
    return sum(max(0.0, min(end, b) - max(start, a)) for a, b in spans) / (end - start)


def _alone_ms(problem: Problem, op: Op) -> float:
    """The op's profiled time alone (ms)."""
    costs = problem.costs
    row = {"F": costs.forward, "B": costs.backward_input, "W": costs.backward_weight}[op[0]]
    return row[op[1] % len(row)] if isinstance(row, list) else float(row)  # dual: stage s >= p runs s - p


def _producer(op: Op, stages: int) -> Op | None:
    """The op on the previous stage of the chain whose output ``op`` needs (loop and V placements)."""
    kind, stage, mb = op
    if kind == "F" and stage > 0:
        return ("F", stage - 1, mb)
    if kind == "B" and stage < stages - 1:
        return ("B", stage + 1, mb)
    return None


def timeline_lines(p: int, curve: list[float], jobs: list[tuple[Problem, list[dict]]]) -> list[str]:
    """Two lines for world size ``p``: the measured slowdown per count of busy ranks (Σ measured /
    Σ alone over the ops whose time-averaged count rounds to k, every replayed row and step), and the
    median hand-off from a producer's end on another rank to the consumer's start."""
    measured: dict[int, float] = defaultdict(float)
    alone: dict[int, float] = defaultdict(float)
    count: dict[int, int] = defaultdict(int)
    handoffs: list[float] = []
    for problem, ranks in jobs:
        stages = problem.devices * problem.stages_per_device
        for ops in _intervals(ranks).values():
            spans = [(start, end) for *_, start, end in ops]
            where = {op: (rank, end) for rank, op, _w, _s, end in ops}
            for rank, op, wait, start, end in ops:
                base = _alone_ms(problem, op)
                if base >= MIN_OP_MS:
                    k = min(p, max(1, round(_busy_ranks(start, end, spans))))
                    measured[k] += 1e3 * (end - start)
                    alone[k] += base
                    count[k] += 1
                src = _producer(op, stages) if problem.placement != "dual" else None
                if src in where and where[src][0] != rank and where[src][1] > wait:  # it waited for that input
                    handoffs.append(1e3 * (start - where[src][1]))
    by_k = ", ".join(f"k = {k}: × {measured[k] / alone[k]:.2f} ({count[k]} ops; curve × {curve[min(k, len(curve)) - 1]:.2f})"
                     for k in sorted(alone) if alone[k] > 0)
    hand = (f"median {statistics.median(handoffs):.2f} ms, 90th percentile "
            f"{statistics.quantiles(handoffs, n=10)[-1]:.2f} ms over {len(handoffs)} waits"
            if len(handoffs) >= 10 else "too few waits to tell")
    return [f"p = {p}: compute slowdown by ranks computing at once, measured (Σ op time / Σ profiled alone): {by_k}",
            f"p = {p}: hand-off, a producer's end on another rank to its consumer's start when the consumer "
            f"waited for it (link latency and comm included): {hand}"]

"""Method ``greedy`` on the list engine keeps its answers: a time-stepped reference for the plain rank
rules, the start times :func:`simulate` gives, and stored hashes of every policy's order and times on
a handful of cases (taken at 101ff6e, before greedy moved onto the engine; ``benchmarks/greedy_identity.py``
compares the whole corpus)."""

from __future__ import annotations

import hashlib
import json
import math

import pytest

from pipesched.solver import Problem
from pipesched.solver.core.instance import Instance, OpId
from pipesched.solver.core.metrics import peak_memory
from pipesched.solver.core.tolerance import within_cap
from pipesched.solver.heuristics.greedy import POLICIES, greedy_schedule
from pipesched.solver.timing.simulate import simulate


def stepped(inst: Instance, rank: dict[str, int]) -> tuple[list[list[OpId]], dict[OpId, float]]:
    """An independent list schedule for integer costs and no cap: at each whole time, every free device
    starts its best op whose input has arrived (rank, then oldest microbatch, then deeper F first)."""
    S, m = inst.num_stages, inst.microbatches
    end: dict[OpId, float] = {}
    start: dict[OpId, float] = {}
    order: list[list[OpId]] = [[] for _ in range(inst.devices)]
    free = [0.0] * inst.devices

    def arrived(op: OpId, t: float) -> bool:
        k, s, i = op
        if k == "F":
            if s == 0:
                return i == 0 or OpId("F", 0, i - 1) in start
            prev = end.get(OpId("F", s - 1, i), math.inf)
            return prev + inst.link(s - 1, s) <= t
        if k == "B":
            prev = end.get(OpId("F", s, i) if s == S - 1 else OpId("B", s + 1, i), math.inf)
            return prev + (inst.link(s, s + 1) if s < S - 1 else 0.0) <= t
        return end.get(OpId("B", s, i), math.inf) <= t

    t = 0.0
    while len(start) < inst.num_ops:
        for d in range(inst.devices):
            if free[d] > t:
                continue
            ready = [OpId(k, s, i) for s in inst.stages_of_device[d] for k in inst.kinds for i in range(m)
                     if OpId(k, s, i) not in start and arrived(OpId(k, s, i), t)]
            if ready:
                op = min(ready, key=lambda o: (rank[o.kind], o.microbatch, -o.stage if o.kind == "F" else o.stage))
                start[op], end[op] = t, t + inst.cost(op)
                free[d] = end[op]
                order[d].append(op)
        t += 1.0
    return order, start


@pytest.mark.parametrize("policy", ["default", "eager-w"])
@pytest.mark.parametrize("problem", [
    Problem(devices=3, microbatches=5),
    Problem(devices=3, microbatches=5, costs={"comm": 1.0, "backward_input": 2.0}),
    Problem(devices=2, microbatches=4, stages_per_device=2),
    Problem(devices=3, microbatches=4, split_backward=False, costs={"forward": 2.0}),
])
def test_the_rank_rules_match_a_time_stepped_list_schedule(problem: Problem, policy: str) -> None:
    inst = Instance.from_problem(problem)
    assert greedy_schedule(inst, policy=policy) == stepped(inst, POLICIES[policy].rank)


CASES = {
    "loop v1 p4 m8 cap 4 comm": Problem(devices=4, microbatches=8, costs={"comm": 0.3}, memory={"limit": 4}),
    "loop v2 p4 m8 cap 5": Problem(devices=4, microbatches=8, stages_per_device=2, memory={"limit": 5}),
    "loop v4 p2 m6 heterogeneous caps": Problem(devices=2, microbatches=6, stages_per_device=4,
                                                memory={"limit": [8, 5]}),
    "V p4 m8 cap 3, per-stage costs": Problem(
        devices=4, microbatches=8, stages_per_device=2, placement="v", memory={"limit": 3},
        costs={"forward": [1, 1.25, 1.5, 1, 1.25, 1.5, 1, 1.25], "backward_input": 1.5, "backward_weight": 0.5}),
    "dual p4 m8": Problem(devices=4, microbatches=8, placement="dual", stages_per_device=2, dual_split=4,
                          memory={"limit": 6}),
    "fused p4 m9 cap 3": Problem(devices=4, microbatches=9, split_backward=False, memory={"limit": 3}),
    "zero-length B, stage_span": Problem(devices=4, microbatches=8, costs={"backward_input": 0.0, "comm": 0.5},
                                         objective="stage_span", memory={"limit": 3}),
}

# policy order: default, eager-w, patient, alternate, headroom, alternate-headroom, follow-lean, follow-wide
EXPECTED = {
    "loop v1 p4 m8 cap 4 comm": "9cb7eddf77f0 f60e48b91060 a1be7b4171fb b5fea57476a5 9cb7eddf77f0 b5fea57476a5 "
                                "a7b15a4dc651 64ef699fc26a",
    "loop v2 p4 m8 cap 5": "34173a68822b a13c1dc9565c 34173a68822b b7653a02eab2 96da1a050e5a 202d2179a462 "
                           "9b37bb574fbf 9b37bb574fbf",
    "loop v4 p2 m6 heterogeneous caps": "fcc7ea36cb97 41f6d92175e9 fcc7ea36cb97 fc92d3d240dd 1ac397a783e0 "
                                        "6ddeda83f4c0 779355a8a0f1 779355a8a0f1",
    "V p4 m8 cap 3, per-stage costs": "993b78834d4d f8d4b27652b1 98eb459484ad 993b78834d4d 8fa6ae0b49ae "
                                      "871e1ff3c94d 2cf602c2dbb4 af8e60beac3e",
    "dual p4 m8": "38c8a60bd116 7e85b1973f83 38c8a60bd116 dbaef5913b7d 38c8a60bd116 dbaef5913b7d eae08f14f1fb "
                  "eae08f14f1fb",
    "fused p4 m9 cap 3": "def81829d159 def81829d159 def81829d159 def81829d159 def81829d159 def81829d159 "
                         "446c7921b614 446c7921b614",
    "zero-length B, stage_span": "d460a1ee8ea8 e85bafd5e9ed d460a1ee8ea8 93416ef9cd54 d460a1ee8ea8 93416ef9cd54 "
                                 "87f640cefc18 7b7add731630",
}


def answer_hash(order: list[list[OpId]], start: dict[OpId, float]) -> str:
    rows = [[[op.kind, op.stage, op.microbatch, start[op]] for op in ops] for ops in order]
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:12]


@pytest.mark.parametrize("name", list(CASES))
def test_every_policy_keeps_its_answer_and_its_start_times_are_the_simulated_ones(name: str) -> None:
    inst = Instance.from_problem(CASES[name])
    got = []
    for policy in POLICIES:
        order, start = greedy_schedule(inst, policy=policy)
        assert start == simulate(inst, order)
        assert all(within_cap(peak, cap) for peak, cap in zip(peak_memory(inst, order), inst.limit, strict=True))
        got.append(answer_hash(order, start))
    assert " ".join(got) == EXPECTED[name]

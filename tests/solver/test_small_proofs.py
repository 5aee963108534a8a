"""Every problem of at most 48 ops is proven optimal by ``auto`` (issue 12 target 1b).

A seeded sweep (V and loop placement, v up to 3, split and fused backward, both objectives, caps
from one microbatch per stage up to loose, comm 0 to 0.3) plus the diagnosed case
``benchmarks/cases/v_tiny.json``. The optimum comes from an oracle that shares no code with the
solver (``wire_oracle.py``: the op graph read from the problem's wire format, an exact CP-SAT model
written apart from the solver's, a validator of its own), for every case; up to 24 ops the brute
force of every per-device order (``bruteforce.py``, on the same wire graph) must agree with it.
``auto`` runs at a 10 s limit; its schedule must also pass the oracle's validator.
"""

from __future__ import annotations

import random
from pathlib import Path

import bruteforce
import pytest
import wire_oracle

from pipesched.solver import Problem, SolveOptions, solve

ROOT = Path(__file__).resolve().parents[2]
SEED = 20261212
CASES = 14


def draw(seed: int, n: int) -> list[Problem]:
    rng = random.Random(seed)
    out: list[Problem] = []
    while len(out) < n:
        placement, v = rng.choice([("v", 2), ("loop", 1), ("loop", 2), ("loop", 3)])
        p = rng.choice([1, 2, 2, 3] if placement == "v" else [1, 2, 2, 3, 4])
        split = rng.random() < 0.75
        m_max = 48 // ((3 if split else 2) * p * v)
        if m_max < 1:
            continue
        stages = p * v

        def costs(lo: float, hi: float, n: int = stages) -> list[float]:
            return [round(rng.uniform(lo, hi), 1) for _ in range(n)]

        b = round(rng.uniform(-0.8, 0.0), 2) if split else -1.0
        memory: dict[str, object] = {"forward": 1.0, "backward_input": b,
                                     "backward_weight": round(-1.0 - b, 2) if split else 0.0}
        if rng.random() < 0.8:  # tight: from one microbatch per chunk up to p per chunk
            memory["limit"] = round(rng.uniform(v, v * p + 0.5), 2)
        cost: dict[str, object] = {"forward": costs(0.5, 2.0), "backward_input": costs(0.5, 2.5),
                                   "comm": rng.choice([0.0, 0.1, 0.3])}
        if split:
            cost["backward_weight"] = costs(0.3, 1.5)
        out.append(Problem(devices=p, microbatches=rng.randint(1, m_max), stages_per_device=v, placement=placement,
                           split_backward=split, objective=rng.choice(["makespan", "stage_span"]),
                           costs=cost, memory=memory))
    return out


SWEEP = draw(SEED, CASES)


def test_the_sweep_covers_v_loop_both_objectives_and_48_ops() -> None:
    assert {p.placement for p in SWEEP} == {"v", "loop"}
    assert {p.objective for p in SWEEP} == {"makespan", "stage_span"}
    assert max(p.num_ops for p in SWEEP) > 24
    assert all(p.num_ops <= 48 for p in SWEEP)


CASES_ALL = [*SWEEP, Problem.model_validate_json((ROOT / "benchmarks/cases/v_tiny.json").read_text())]
IDS = [f"case{k}" for k in range(CASES)] + ["v_tiny"]


@pytest.mark.parametrize("problem", CASES_ALL, ids=IDS)
def test_auto_proves_every_small_problem_optimal(problem: Problem) -> None:
    got = solve(problem, "auto", SolveOptions(time_limit_s=10))
    assert wire_oracle.violations(problem, got.ops, got.objective_value) == []
    best = wire_oracle.optimum(problem)
    assert best is not None
    assert got.status == "optimal", (got.objective_value, best, got.lower_bound)
    assert got.objective_value == pytest.approx(best, rel=1e-6)


@pytest.mark.parametrize("problem", [p for p in CASES_ALL if p.num_ops <= 24],
                         ids=[i for i, p in zip(IDS, CASES_ALL, strict=True) if p.num_ops <= 24])
def test_the_two_oracles_agree_up_to_24_ops(problem: Problem) -> None:
    """CP-SAT on the wire model and the enumeration of every per-device order: two searches, one answer."""
    assert bruteforce.optimum(problem) == pytest.approx(wire_oracle.optimum(problem), rel=1e-9)

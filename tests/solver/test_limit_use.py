"""``auto`` uses its limit (the windows fill it) and a larger limit never returns a worse answer.

Counted, never timed: as ``benchmarks/answers.py`` does, the solver's clock is frozen (no wall-clock net
fires) and its exact searches are stand-ins that return their warm start and say what they would be
counted (a search that ran to its deterministic limit). What is checked is the accounting: the counted
seconds ``auto`` used, the windows it ran and the answers it returned, all functions of the problem and
the limit alone.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from answers import freeze_solver  # noqa: E402

from pipesched.solver import Problem, SolveOptions, methods, solve
from pipesched.solver.budget import FULL_MODEL_OPS, finish_margin, retime_cost
from pipesched.solver.budget.limit import CANONICAL_LIMIT_S
from pipesched.solver.core.instance import Instance
from pipesched.solver.exact.cpsat import lns as cpsat_lns
from pipesched.solver.exact.cpsat import relaxations, run
from pipesched.solver.heuristics.search import Search
from pipesched.solver.portfolio import chain_fill, lns, small


def _paper_like(p: int, m: int, v: int, placement: str, objective: str, cap: float) -> Problem:
    """A small problem shaped like the tuning set's (benchmarks/cases.py: 14.6B's Table 6 profile)."""
    f, b, w, h, a = 11.347, 11.248, 8.132, 5120, 40
    mb, mw = (34 * h + 5 * a * 1024) / v, 32 * h / v
    jitter = [1.0 + 0.01 * ((3 * k) % 5 - 2) for k in range(p * v)]
    return Problem(devices=p, microbatches=m, stages_per_device=v, placement=placement, objective=objective,
                   costs={"forward": [f / v * j for j in jitter], "backward_input": [b / v * j for j in jitter],
                          "backward_weight": [w / v for _ in jitter], "comm": 0.377},
                   memory={"forward": mb, "backward_input": mw - mb, "backward_weight": -mw,
                           "limit": round(cap * p * mb * v, 1)})


CASES = {
    "loop p4 m8 span 1.2p": _paper_like(4, 8, 1, "loop", "stage_span", 1.2),
    "loop2 p4 m8 span 1.2p": _paper_like(4, 8, 2, "loop", "stage_span", 1.2),
    "v p4 m8 span 1.5p": _paper_like(4, 8, 2, "v", "stage_span", 1.5),
}


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Freeze the clock, put stand-ins in place of the exact searches, and record what the final phase
    saw: the counted seconds at its end and every window it ran (``complete``: what the stand-in window
    says of its search)."""
    methods()
    seen: dict[str, Any] = {"windows": [], "counted": None, "complete": False}

    def search(inst: Instance, inc: Any, *args: Any, known_bound: float | None = None,
               nominal: float | None = None, **kwargs: Any) -> run.CpsatResult:  # used half its plan
        return run.CpsatResult(inc, False, known_bound, counted=(nominal or 0.0) / 2)

    def window(inst: Instance, inc: Any, runs: dict[int, tuple[int, int]], *, seconds: float,
               **kwargs: Any) -> cpsat_lns.WindowResult:
        seen["windows"].append(sorted(runs.items()))
        return cpsat_lns.WindowResult(inc, seen["complete"], seconds)

    stubs: dict[Callable[..., Any], Callable[..., Any]] = {
        run.solve_model: search, cpsat_lns.solve_window: window,
        relaxations.relaxation_bound: lambda *a, **k: 0.0,
        small.ilp_first: lambda problem, inst, inc, seconds: (inc, False, None),
    }
    freeze_solver(stubs, monkeypatch.setattr)  # benchmarks/answers.py's frozen clock and stand-ins
    final = lns.WindowsPhase.run

    def record(self: lns.WindowsPhase, s: Search) -> None:
        final(self, s)
        seen["counted"] = s.budget.spent

    monkeypatch.setattr(lns.WindowsPhase, "run", record)
    yield seen


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("limit", [2.0, 10.0])
def test_an_unproven_answer_counts_at_least_three_quarters_of_its_limit(counted: dict[str, Any], name: str,
                                                                        limit: float) -> None:
    got = solve(CASES[name], "auto", SolveOptions(time_limit_s=limit))
    assert got.status == "feasible" and counted["windows"], "the case must leave the gap open for the windows"
    assert counted["counted"] >= 0.75 * limit
    inst = Instance.from_problem(CASES[name])  # and never past it: one window short at most
    last = cpsat_lns.window_cost(inst, lns.LNS_MAX_SEARCH * lns.window_seconds(limit))
    assert limit - finish_margin(inst) - last < counted["counted"] <= limit - finish_margin(inst) + retime_cost(inst)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_larger_limit_never_returns_a_worse_answer(counted: dict[str, Any], name: str) -> None:
    values = []
    for limit in (2.0, 5.0, 10.0):
        counted["windows"].clear()
        got = solve(CASES[name], "auto", SolveOptions(time_limit_s=limit))
        values.append(got.objective_value)
    assert all(b <= a for a, b in zip(values, values[1:], strict=False)), values


def test_above_the_canonical_limit_the_windows_extend_a_prefix(counted: dict[str, Any]) -> None:
    """Structural: every limit from the canonical one up runs the same phases before the windows and
    the same windows in the same order, the larger limit more of them."""
    runs = {}
    for limit in (CANONICAL_LIMIT_S, 2 * CANONICAL_LIMIT_S):
        counted["windows"].clear()
        solve(CASES["v p4 m8 span 1.5p"], "auto", SolveOptions(time_limit_s=limit))
        runs[limit] = list(counted["windows"])
    short, long = runs[CANONICAL_LIMIT_S], runs[2 * CANONICAL_LIMIT_S]
    assert short and len(long) > len(short) and long[:len(short)] == short


def test_exhausted_windows_stop_early_and_say_so(counted: dict[str, Any]) -> None:
    counted["complete"] = True  # every window searched to its end, none improving
    got = solve(CASES["loop p4 m8 span 1.2p"], "auto", SolveOptions(time_limit_s=60.0))
    assert got.status == "feasible" and counted["counted"] < 0.75 * 60.0
    assert got.reason is not None and "exhausted" in got.reason


def test_above_full_model_ops_the_order_searches_count_at_least_three_quarters(
        counted: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """No CP-SAT model (so no window) runs above FULL_MODEL_OPS: the final order searches fill the limit."""
    problem = _paper_like(8, FULL_MODEL_OPS // 24 + 1, 1, "loop", "stage_span", 1.2)
    inst = Instance.from_problem(problem)
    assert inst.num_ops > FULL_MODEL_OPS
    fill, seen = chain_fill.ChainFillPhase.run, {}

    def record(self: chain_fill.ChainFillPhase, s: Search) -> None:
        fill(self, s)
        seen["counted"] = s.budget.spent

    monkeypatch.setattr(chain_fill.ChainFillPhase, "run", record)
    limit = 3.0
    got = solve(problem, "auto", SolveOptions(time_limit_s=limit))
    assert got.status == "feasible" and not counted["windows"]
    assert got.reason is None or "exhausted" not in got.reason  # the searches still find moves here
    assert 0.75 * limit <= seen["counted"] <= limit - finish_margin(inst)

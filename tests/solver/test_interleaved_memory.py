"""The interleaved memory greedy (issue 12 target 3): every order valid within any cap IZB's order fits,
and below IZB's own order on target 3's family shrunk to p = 2, m = 4."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from pipesched.solver import Instance, Problem, SolveOptions, solve
from pipesched.solver.budget import Budget
from pipesched.solver.core.metrics import peak_memory
from pipesched.solver.heuristics.classic.interleaved_zb import interleaved_zb_order
from pipesched.solver.heuristics.interleaved_memory import (
    POLICIES,
    interleaved_candidates,
    interleaved_order,
)
from pipesched.solver.heuristics.search import Search
from pipesched.solver.portfolio.candidates import HeuristicsPhase
from pipesched.solver.timing.finalize import finalize
from pipesched.solver.timing.retime import retime
from pipesched.solver.timing.simulate import DeadlockError

#: The zero-bubble paper's 1.5B profile (Table 6) for a whole stage, and its memory (h = 1536, a = 24, s = 1024).
PAPER = {"forward": 18.522, "backward_input": 18.086, "backward_weight": 9.337, "comm": 0.601}
MB, MW = 34 * 1536 + 5 * 24 * 1024, 32 * 1536


def loop_problem(p: int, m: int, v: int, seed: int, split: bool = True, objective: str = "stage_span") -> Problem:
    """Loop placement, v chunks of jittered paper costs, capped at the IZB order's own peak."""
    rng = random.Random(seed)

    def costs(x: float) -> list[float]:
        return [round(x / v * rng.uniform(0.98, 1.02), 4) for _ in range(p * v)]

    problem = Problem(devices=p, microbatches=m, stages_per_device=v, placement="loop", objective=objective,
                      split_backward=split,
                      costs={"forward": costs(PAPER["forward"]), "backward_input": costs(PAPER["backward_input"]),
                             "backward_weight": costs(PAPER["backward_weight"]), "comm": PAPER["comm"]},
                      memory={"forward": MB / v, "backward_input": (MW - MB) / v, "backward_weight": -MW / v})
    peak = max(peak_memory(Instance.from_problem(problem), interleaved_zb_order(Instance.from_problem(problem))))
    return problem.model_copy(update={"memory": problem.memory.model_copy(update={"limit": round(peak, 6)})})


@settings(max_examples=30, deadline=None)
@given(p=st.integers(2, 4), v=st.integers(2, 4), extra=st.integers(0, 5), seed=st.integers(0, 10_000),
       split=st.booleans(), objective=st.sampled_from(["makespan", "stage_span"]),
       loosen=st.sampled_from([1.0, 1.0, 1.2, 2.0]))
def test_every_order_is_valid_under_tight_caps(p: int, v: int, extra: int, seed: int, split: bool, objective: str,
                                               loosen: float) -> None:
    problem = loop_problem(p, p + extra, v, seed, split, objective)
    problem = problem.model_copy(update={"memory": problem.memory.model_copy(
        update={"limit": problem.memory.limit * loosen})})
    inst = Instance.from_problem(problem)
    ran = 0
    for policy in POLICIES:
        try:
            order = interleaved_order(inst, policy)
        except DeadlockError:
            continue
        ran += 1
        assert max(peak_memory(inst, order)) <= problem.memory.limit * (1 + 1e-9)
        finalize(problem, "interleaved-memory", retime(inst, order).start, inst=inst)  # raises if invalid
    assert ran, "every policy got stuck although IZB's order fits the cap"
    for inc in interleaved_candidates(inst):
        finalize(problem, "interleaved-memory", inc.start, inst=inst)


def test_below_izb_on_the_shrunk_target_3_case() -> None:
    """p = 2, m = 4, v = 2 at IZB's peak: the ILP optimum runs a microbatch's second-chunk forward before
    a new first-chunk one and defers a W; the greedy's forward sequence does the first. The set derived by
    hand from this very case was below IZB on all five seeds; the set chosen on the interleaved tuning set
    (p >= 4, benchmarks/tune_list_policies.py) is below it on seeds 1, 3 and 4 and within 0.5% on 0 and 2."""
    below = 0
    for seed in range(5):
        problem = loop_problem(2, 4, 2, seed)
        inst = Instance.from_problem(problem)
        izb = retime(inst, interleaved_zb_order(inst)).objective
        best = interleaved_candidates(inst, keep=1)
        assert best, "no order within IZB's peak"
        below += best[0].objective < izb - 1e-6
        assert best[0].objective < izb * 1.005, (seed, best[0].objective, izb)
    assert below >= 3


def test_auto_takes_its_orders() -> None:
    """The portfolio's heuristic phase holds the greedy's order, ahead of every recipe and IZB here,
    and ``auto``'s answer is never worse than it."""
    problem = loop_problem(3, 6, 2, 0)
    inst = Instance.from_problem(problem)
    options = SolveOptions(time_limit_s=5)
    search = Search(problem, inst, options, Budget(options.time_limit_s), bound=0.0)
    HeuristicsPhase().run(search)
    found = search.found
    best = interleaved_candidates(inst, keep=1)[0].objective
    assert found[0][0].startswith("interleaved-memory"), found[0][0]
    assert best < retime(inst, interleaved_zb_order(inst)).objective - 1e-6
    got = solve(problem, "auto", options)
    assert got.objective_value is not None and got.objective_value <= best + 1e-6


def test_not_applicable_off_loop() -> None:
    assert interleaved_candidates(Instance.from_problem(Problem(devices=2, microbatches=4))) == []

"""CP-SAT with overlapped F&B pairs (``costs.overlap_fb``, ``solver/exact/cpsat/overlap.py``): its
proven optima equal a brute force over every per-device order and pairing, are never worse than a
recipe or heuristic, are valid, and its refusals name the field."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from pipesched.solver import Instance, NotApplicableError, Problem, SolveOptions, solve, validate
from pipesched.solver.budget import PAIRED_MAX_OPS
from pipesched.solver.core.instance import OpId
from pipesched.solver.core.metrics import peak_memory
from pipesched.solver.exact.cpsat.overlap import candidate_pairs, paired_scaling
from pipesched.solver.timing.overlap import pair_map, timed_pairs
from pipesched.solver.timing.simulate import DeadlockError, simulate

COSTS = {"forward": 1.0, "backward_input": 1.5, "backward_weight": 0.5, "comm": 0.05}


def dual(p: int, m: int, overlap: float | None = 0.7, **kw: object) -> Problem:
    costs = {**COSTS, **kw.pop("costs", {}), "overlap_fb": overlap}  # type: ignore[dict-item]
    return Problem(devices=p, microbatches=m, stages_per_device=2, placement="dual", costs=costs, **kw)


def v(p: int, m: int, overlap: float | None = 0.7, **kw: object) -> Problem:
    costs = {**COSTS, **kw.pop("costs", {}), "overlap_fb": overlap}  # type: ignore[dict-item]
    return Problem(devices=p, microbatches=m, stages_per_device=2, placement="v", costs=costs, **kw)


# ---- an independent oracle: every per-device sequence of single ops and F&B pairs ----------------

def _ancestors(inst: Instance) -> dict[OpId, set[OpId]]:
    anc: dict[OpId, set[OpId]] = {}

    def walk(op: OpId) -> set[OpId]:
        if op not in anc:
            anc[op] = set()
            for a, _ in inst.predecessors(op):
                anc[op] |= walk(a) | {a}
        return anc[op]

    for op in inst.ops():
        walk(op)
    return anc


def _sequences(ops: list[OpId], anc: dict[OpId, set[OpId]]) -> list[tuple[list[OpId], list[tuple[OpId, OpId]]]]:
    """Every order of ``ops`` whose same-device ancestors come first, with every choice of F&B pairs
    (any F and B both ready at that point, of any microbatch: the oracle does not assume which pair)."""
    mine = set(ops)
    local = {op: anc[op] & mine for op in ops}
    out: list[tuple[list[OpId], list[tuple[OpId, OpId]]]] = []

    def rec(done: list[OpId], pairs: list[tuple[OpId, OpId]]) -> None:
        if len(done) == len(ops):
            out.append((list(done), list(pairs)))
            return
        placed = set(done)
        ready = [op for op in ops if op not in placed and local[op] <= placed]
        for op in ready:
            rec([*done, op], pairs)
        for f, b in itertools.product(ready, ready):
            if f.kind == "F" and b.kind == "B":
                rec([*done, f, b], [*pairs, (f, b)])

    rec([], [])
    return out


def _makespan(inst: Instance, start: dict[OpId, float], pairs: dict[OpId, OpId]) -> float:
    def length(op: OpId) -> float:
        if op not in pairs:
            return inst.cost(op)
        return inst.pair_cost(op, pairs[op]) if op.kind == "F" else inst.pair_cost(pairs[op], op)

    return max(t + length(op) for op, t in start.items())


def brute_force(problem: Problem) -> tuple[float, float]:
    """The least makespan over every per-device sequence and pairing within the cap (earliest starts
    of an order are optimal for a makespan), and the least over those without a pair."""
    inst = Instance.from_problem(problem)
    anc = _ancestors(inst)
    per = [_sequences([op for op in inst.ops() if inst.device(op) == d], anc) for d in range(inst.devices)]
    best, unpaired = math.inf, math.inf
    for combo in itertools.product(*per):
        order = [seq for seq, _ in combo]
        if any(pk > cap + 1e-9 for pk, cap in zip(peak_memory(inst, order), inst.limit, strict=True)):
            continue
        chosen = [pr for _, prs in combo for pr in prs]
        pairs = pair_map(chosen)
        try:
            value = _makespan(inst, simulate(inst, order, pairs=pairs), pairs)
        except DeadlockError:
            continue
        best = min(best, value)
        if not chosen:
            unpaired = min(unpaired, value)
    return best, unpaired


# ---- the tests ------------------------------------------------------------------------------------

def loop(p: int, m: int, overlap: float = 0.7, **kw: object) -> Problem:
    costs = {**COSTS, **kw.pop("costs", {}), "overlap_fb": overlap}  # type: ignore[dict-item]
    return Problem(devices=p, microbatches=m, costs=costs, **kw)


#: Tiny problems (at most 6 ops per device, so the oracle enumerates them in seconds). On those in
#: PAIRS_HELP the optimum with pairs is strictly below the one without (checked below), so a model that
#: ignored or mis-timed the pairs would fail; on the capped ones the cap binds (checked below), and a
#: pair's memory must be walked as the validator walks it (F first).
TINY = {
    "loop-p1-m2": loop(1, 2),
    "v-p1-m2-fused": v(1, 2, split_backward=False),
    "v-p1-m2-fused-capped": v(1, 2, split_backward=False, memory={"limit": 2}),
    "loop-p2-m3-fused": loop(2, 3, split_backward=False),
    "loop-p2-m3-fused-capped": loop(2, 3, split_backward=False, memory={"limit": 2}),
    "loop-p2-m2": loop(2, 2),
    "dual-p2-m3-fused": dual(2, 3, split_backward=False),
    "dual-p2-m3-fused-capped": dual(2, 3, split_backward=False, memory={"limit": 2}),
    "dual-p2-m3-fused-long-f": dual(2, 3, overlap=0.6, split_backward=False, costs={"forward": 2.0}),
    "dual-p2-m2": dual(2, 2),
}
PAIRS_HELP = ["loop-p1-m2", "v-p1-m2-fused", "v-p1-m2-fused-capped", "loop-p2-m3-fused", "loop-p2-m2",
              "dual-p2-m3-fused", "dual-p2-m3-fused-long-f"]
CAPPED = {"v-p1-m2-fused-capped": "v-p1-m2-fused", "loop-p2-m3-fused-capped": "loop-p2-m3-fused",
          "dual-p2-m3-fused-capped": "dual-p2-m3-fused"}
_ORACLE: dict[str, tuple[float, float]] = {}


def oracle(name: str) -> tuple[float, float]:
    if name not in _ORACLE:
        _ORACLE[name] = brute_force(TINY[name])
    return _ORACLE[name]


@pytest.mark.parametrize("name", list(TINY))
def test_cpsat_proven_optimum_with_pairs_is_the_brute_force_optimum(name: str) -> None:
    schedule = solve(TINY[name], "cpsat", SolveOptions(time_limit_s=5))
    assert validate(schedule) == []
    assert schedule.status == "optimal"
    assert schedule.objective_value == pytest.approx(oracle(name)[0], abs=1e-6)
    assert schedule.lower_bound == pytest.approx(schedule.objective_value, abs=1e-6)


@pytest.mark.parametrize("name", PAIRS_HELP)
def test_pairs_change_the_optimum_so_the_brute_force_can_tell(name: str) -> None:
    """The optimum with pairs is below the optimum without (both by the oracle), and the model's
    answer uses a pair: a model that ignored the pairs would fail the test above."""
    best, unpaired = oracle(name)
    assert best < unpaired - 1e-6
    schedule = solve(TINY[name], "cpsat", SolveOptions(time_limit_s=5))
    assert timed_pairs(schedule.ops, Instance.from_problem(TINY[name]))


SHAPES = [dict(devices=1, microbatches=2), dict(devices=2, microbatches=2),
          dict(devices=1, microbatches=2, stages_per_device=2, placement="v", split_backward=False),
          dict(devices=2, microbatches=3, split_backward=False),
          dict(devices=2, microbatches=3, stages_per_device=2, placement="dual", split_backward=False),
          dict(devices=2, microbatches=2, stages_per_device=2, placement="dual")]


def random_tiny(seed: int) -> Problem:
    """A tiny problem of shape ``SHAPES[seed % 6]`` with per-stage costs, overlap factors and memory
    drawn from ``seed``, capped half the time."""
    rng = random.Random(seed)
    shape = SHAPES[seed % len(SHAPES)]
    n = shape["devices"] * (1 if shape.get("placement") == "dual" else shape.get("stages_per_device", 1))

    def draw(values: list[float]) -> list[float]:
        return [rng.choice(values) for _ in range(n)]

    costs = {"forward": draw([0.5, 1.0, 1.5, 2.0]), "backward_input": draw([0.5, 1.0, 2.0, 3.0]),
             "backward_weight": draw([0.25, 0.5, 1.0]), "comm": rng.choice([0.0, 0.05, 0.3]),
             "overlap_fb": draw([0.5, 0.6, 0.75, 0.9, 1.0])}
    forward = draw([1.0, 2.0])
    held = [rng.choice([0.0, 0.5]) * x for x in forward]  # released by B; the rest by W
    memory: dict[str, object] = {"forward": forward, "backward_input": [-x for x in held],
                                 "backward_weight": [-(x - y) for x, y in zip(forward, held, strict=True)]}
    if rng.random() < 0.5:
        memory["limit"] = rng.choice([2.0, 3.0, 4.0])
    return Problem(costs=costs, memory=memory, **shape)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(24))
def test_random_tiny_problems_cpsat_optimum_is_the_brute_force_optimum(seed: int) -> None:
    """Per-stage costs and factors, comm, memory released by B or W, caps: the model's proven optimum
    is the oracle's (or both find no schedule within the cap). On half of these seeds the oracle's
    optimum with pairs is below the one without, and one has no schedule within its cap."""
    problem = random_tiny(seed)
    best, _ = brute_force(problem)
    schedule = solve(problem, "cpsat", SolveOptions(time_limit_s=10))
    if math.isinf(best):
        assert not schedule.ops
    else:
        assert validate(schedule) == [] and schedule.status == "optimal"
        assert schedule.objective_value == pytest.approx(best, abs=1e-6)


@pytest.mark.parametrize("capped", list(CAPPED))
def test_the_capped_cases_cap_binds(capped: str) -> None:
    """With the cap the optimum is worse than without: those cases test the memory of pairs."""
    assert oracle(capped)[0] > oracle(CAPPED[capped])[0] + 1e-6


@pytest.mark.parametrize("problem", [
    pytest.param(dual(2, 4), id="dual-p2-m4"),
    pytest.param(dual(2, 4, split_backward=False), id="dual-p2-m4-fused"),
    pytest.param(dual(2, 4, memory={"limit": 2}), id="dual-p2-m4-capped"),  # dualpipe needs 3: greedy only
    pytest.param(v(2, 4, overlap=0.6), id="v-p2-m4"),
])
def test_cpsat_with_pairs_is_optimal_and_never_worse_than_any_recipe_or_heuristic(problem: Problem) -> None:
    from pipesched.solver import methods

    schedule = solve(problem, "cpsat", SolveOptions(time_limit_s=5))
    assert validate(schedule) == [] and schedule.status == "optimal"
    others = 0
    for m in methods():
        if m.name in ("cpsat", "ilp", "auto") or m.applies(problem):
            continue
        try:
            other = solve(problem, m.name)
        except NotApplicableError:
            continue
        others += 1
        assert schedule.objective_value <= other.objective_value + 1e-9, m.name
    assert others >= (1 if problem.memory.limit is not None else 2)  # greedy; dualpipe(-v) when uncapped


def test_stage_span_with_pairs_is_proven_and_valid() -> None:
    problem = dual(2, 3, objective="stage_span")
    schedule = solve(problem, "cpsat", SolveOptions(time_limit_s=10))
    assert validate(schedule) == [] and schedule.status == "optimal"
    assert schedule.objective_value < solve(problem, "dualpipe").objective_value - 1e-6


def test_the_window_pruning_keeps_every_pair_of_a_schedule_within_the_horizon() -> None:
    """Candidate pairs are one device and other microbatches; with a horizon the start windows drop
    some, but never a pair that a schedule ending by the horizon uses (here the recipe's own)."""
    problem = dual(4, 8)
    inst = Instance.from_problem(problem)
    sc = paired_scaling(inst)
    every = candidate_pairs(inst, sc)
    assert all(inst.device(f) == inst.device(b) and f.microbatch != b.microbatch for f, b in every)
    assert len(every) == 4 * (8 * 8 - 8)  # each device: 8 F x 8 B of its two stages, minus same microbatch
    recipe = solve(problem, "dualpipe")
    used = {(f, b) for f, b in timed_pairs(recipe.ops, inst).items() if f.kind == "F"}
    pruned = candidate_pairs(inst, sc, horizon=sc.up(recipe.makespan) + 1)
    assert used and used <= set(pruned)
    assert len(pruned) < len(every)


def test_pair_lengths_set_the_time_resolution() -> None:
    """Costs whole at 10 but a pair lasting 0.7 x 2.5 = 1.75: the model needs hundredths to be exact."""
    inst = Instance.from_problem(dual(2, 2, costs={"comm": 0.0}))
    sc = paired_scaling(inst)
    assert sc.time_exact and sc.time % 100 == 0


def test_the_exact_model_refuses_large_overlapped_problems_by_op_count() -> None:
    big = dual(8, 16)
    assert big.num_ops > PAIRED_MAX_OPS
    with pytest.raises(NotApplicableError, match=rf"costs.overlap_fb: .*at most {PAIRED_MAX_OPS} ops"):
        solve(big, "cpsat")
    negative = dual(2, 2, memory={"forward": -1.0, "backward_input": 2.0, "backward_weight": -1.0})
    with pytest.raises(NotApplicableError, match="negative memory.forward"):
        solve(negative, "cpsat")


# ---- auto runs the paired model where it applies (solver/portfolio/paired.py) ----------------------

@pytest.mark.parametrize("p,m", [(2, 2), (2, 4)])
def test_auto_proves_the_paired_optimum_on_small_dual_problems(p: int, m: int) -> None:
    problem = dual(p, m)
    answer = solve(problem, "auto", SolveOptions(time_limit_s=10))
    assert validate(answer) == []
    assert answer.status == "optimal" and answer.method == "auto"
    assert answer.lower_bound == pytest.approx(answer.objective_value, abs=1e-6)
    exact = solve(problem, "cpsat", SolveOptions(time_limit_s=10))
    assert exact.status == "optimal"
    assert answer.objective_value == pytest.approx(exact.objective_value, abs=1e-6)
    if m >= 2 * p:
        assert answer.objective_value <= solve(problem, "dualpipe", SolveOptions()).objective_value + 1e-6


def test_auto_with_pairs_beats_the_best_pair_free_schedule_where_pairs_help() -> None:
    problem = dual(2, 4)
    without = problem.model_copy(update={"costs": problem.costs.model_copy(update={"overlap_fb": None})})
    plain = solve(without, "auto", SolveOptions(time_limit_s=10))
    assert plain.status == "optimal"
    recipe = solve(problem, "dualpipe", SolveOptions())  # what auto returned before it ran the paired model
    best_before = min(plain.objective_value, recipe.objective_value)
    assert solve(problem, "auto", SolveOptions(time_limit_s=10)).objective_value < best_before - 1e-6


def test_auto_above_the_paired_model_size_still_answers_with_pairs_allowed() -> None:
    problem = dual(4, 48)
    assert problem.num_ops > PAIRED_MAX_OPS
    answer = solve(problem, "auto", SolveOptions(time_limit_s=3))
    assert validate(answer) == [] and answer.ops
    assert answer.objective_value <= solve(problem, "dualpipe", SolveOptions()).objective_value + 1e-6

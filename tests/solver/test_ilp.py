"""The ``ilp`` method: proven optima match brute force and CP-SAT, statuses tell the truth."""

from __future__ import annotations

import functools
import json
import random
import subprocess
import sys

import pytest
from requires import require

from pipesched.solver import (
    Instance,
    OpId,
    Problem,
    Schedule,
    SolveOptions,
    finalize,
    solve,
    validate,
)
from pipesched.solver.core.metrics import objective_value, peak_memory
from pipesched.solver.exact.ilp import backends as ilp_backends
from pipesched.solver.exact.ilp import formulation as ilp_model
from pipesched.solver.exact.ilp import method as ilp
from pipesched.solver.timing.retime import best_times

UNEVEN3 = {"forward": [1.0, 2.0, 1.5], "backward_input": [1.0, 1.5, 2.0], "backward_weight": [0.5, 0.25, 0.75],
           "comm": 0.25}
UNEVEN4 = {"forward": [1.0, 1.5, 1.0, 2.0], "backward_input": [1.5, 1.0, 2.0, 1.0],
           "backward_weight": [0.5, 1.0, 0.5, 0.5], "comm": 0.5}

#: Small cases (p <= 4, m <= 6) covering both objectives, uneven costs, comm, memory limits,
#: split/fused backward, loop placement with v = 2 and the V shape. Kept tiny: CBC is slow.
SMALL_CASES: dict[str, dict] = {
    "unit-makespan": dict(devices=2, microbatches=3),
    "unit-span": dict(devices=3, microbatches=3, objective="stage_span"),
    "uneven-comm-makespan": dict(devices=3, microbatches=3, costs=UNEVEN3),
    "uneven-comm-span": dict(devices=3, microbatches=3, costs=UNEVEN3, objective="stage_span"),
    "limit-makespan": dict(devices=4, microbatches=6, memory={"limit": 2}),
    "limit-per-device-span": dict(devices=3, microbatches=4, costs=UNEVEN3, memory={"limit": [2, 2, 1]},
                                  objective="stage_span"),
    "fused-limit": dict(devices=3, microbatches=4, split_backward=False, costs=UNEVEN3, memory={"limit": 2}),
    "fused-span": dict(devices=2, microbatches=4, split_backward=False, objective="stage_span",
                       costs={"forward": 1, "backward_input": 1.5, "backward_weight": 0.5, "comm": 0.5}),
    "loop-v2": dict(devices=2, microbatches=2, stages_per_device=2, costs=UNEVEN4),
    "loop-v2-limit-span": dict(devices=2, microbatches=3, stages_per_device=2, memory={"limit": 3},
                               objective="stage_span"),
    "v-shape": dict(devices=2, microbatches=3, stages_per_device=2, placement="v", costs=UNEVEN4),
    "v-shape-fused-limit": dict(devices=2, microbatches=4, stages_per_device=2, placement="v", split_backward=False,
                                memory={"limit": 3}),
    "uneven-memory": dict(devices=3, microbatches=3, memory={"forward": [2, 1, 3], "backward_input": [-1, 0, -1],
                                                             "backward_weight": [-1, -1, -2], "limit": 4}),
    "zero-length-ops": dict(devices=3, microbatches=3, objective="stage_span", memory={"limit": 2},
                            costs={"forward": [1, 0, 1], "backward_input": [0, 1, 1], "backward_weight": 0}),
}

#: Tiny enough for brute force.
TINY_CASES: dict[str, dict] = {
    "unit-makespan": dict(devices=2, microbatches=2),
    "unit-span": dict(devices=2, microbatches=3, objective="stage_span"),
    "uneven-comm-span": dict(devices=2, microbatches=2, objective="stage_span",
                             costs={"forward": [1, 2], "backward_input": [2, 1], "backward_weight": [0.5, 1], "comm": 0.5}),
    "limit": dict(devices=2, microbatches=3, memory={"limit": 1}),
    "fused-limit-comm": dict(devices=2, microbatches=3, split_backward=False, memory={"limit": 2},
                             costs={"forward": 1, "backward_input": 1, "backward_weight": 1, "comm": 0.5}),
    "loop-v2": dict(devices=2, microbatches=1, stages_per_device=2, costs=UNEVEN4),
    "v-shape-span": dict(devices=2, microbatches=2, stages_per_device=2, placement="v", split_backward=False,
                         objective="stage_span"),
    "zero-length-ops": dict(devices=2, microbatches=3, objective="stage_span",
                            costs={"forward": 1, "backward_input": 0, "backward_weight": 0},
                            memory={"forward": 1, "backward_input": -0.5, "backward_weight": -0.5, "limit": 1.5}),
}

TOL = 1e-6


@functools.cache
def _ilp(case: str, table: str = "small") -> Schedule:
    cases = SMALL_CASES if table == "small" else TINY_CASES
    return solve(Problem(**cases[case]), "ilp", SolveOptions(time_limit_s=60))


def _random_order(inst: Instance, rng: random.Random) -> list[list[OpId]]:
    """A random deadlock-free order: dispatch a random ready op, repeatedly."""
    order: list[list[OpId]] = [[] for _ in range(inst.devices)]
    done: set[OpId] = set()
    left = set(inst.ops())
    while left:
        op = rng.choice(sorted(o for o in left if all(p in done for p, _ in inst.predecessors(o))))
        left.remove(op)
        done.add(op)
        order[inst.device(op)].append(op)
    return order


@pytest.mark.parametrize("case", sorted(TINY_CASES))
def test_ilp_proves_the_brute_force_optimum(case: str) -> None:
    import bruteforce
    schedule = _ilp(case, "tiny")
    expected = bruteforce.optimum(Problem(**TINY_CASES[case]))
    assert expected is not None
    assert schedule.status == "optimal"
    assert schedule.objective_value == pytest.approx(expected, rel=TOL, abs=TOL)


@pytest.mark.parametrize("case", sorted(SMALL_CASES))
def test_ilp_and_cpsat_agree_on_the_optimum(case: str) -> None:
    schedule = _ilp(case)
    assert schedule.status == "optimal"
    other = solve(Problem(**SMALL_CASES[case]), "cpsat", SolveOptions(time_limit_s=10))
    assert other.objective_value == pytest.approx(schedule.objective_value, rel=TOL, abs=TOL)
    assert other.lower_bound is None or other.lower_bound <= schedule.objective_value + TOL


def test_most_small_optima_are_proven_by_the_solver_not_by_the_analytic_bound() -> None:
    """Guard against a suite that cannot fail: 'optimal' must mostly come from the solver's own proof."""
    proven_by_solver = [
        case for case, kwargs in SMALL_CASES.items()
        if ilp.analytic_lower_bound(Instance.from_problem(Problem(**kwargs))) < _ilp(case).objective_value - TOL
    ]
    assert len(proven_by_solver) >= len(SMALL_CASES) // 2


@pytest.mark.parametrize("case", ["uneven-comm-span", "limit-makespan", "v-shape-fused-limit", "uneven-memory"])
def test_the_model_alone_finds_the_optimum_without_a_warm_start(case: str) -> None:
    """The heuristics often already hold the optimum; the model must reach it by itself too."""
    inst = Instance.from_problem(Problem(**SMALL_CASES[case]))
    horizon = ilp.fallback_horizon(inst)
    if inst.objective == "stage_span":
        horizon *= 2
    model = ilp_model.build_model(inst, horizon, ilp.analytic_lower_bound(inst), horizon)
    result = ilp_backends.run_cbc(model, 60, warm=False)
    assert result.status == "optimal"
    order = ilp_model.order_from_solution(model, lambda name: result.values.get(name, 0.0))
    assert objective_value(inst, best_times(inst, order)) == pytest.approx(_ilp(case).objective_value, abs=TOL)


@pytest.mark.parametrize("case", ["limit-per-device-span", "v-shape-fused-limit"])
def test_highs_backend_proves_the_same_optimum_in_a_subprocess(case: str) -> None:
    require("highspy", load=False)  # importing it here would break OR-Tools in this process
    schedule = solve(Problem(**SMALL_CASES[case]), "ilp", SolveOptions(time_limit_s=60, backend="highs"))
    assert schedule.status == "optimal"
    assert schedule.objective_value == pytest.approx(_ilp(case).objective_value, rel=TOL, abs=TOL)
    assert "highspy" not in sys.modules  # it would break OR-Tools in this process


def test_importing_the_ilp_module_keeps_ortools_importable() -> None:
    require("highspy", load=False)  # the clash it guards against needs highspy installed
    code = "import pipesched.solver.exact.ilp.method; from ortools.sat.python import cp_model; print('ok')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


HARD = dict(devices=4, microbatches=8, objective="stage_span",
            costs={"forward": [1, 2, 1.5, 1], "backward_input": [1, 1, 2, 1.2], "backward_weight": 0.7, "comm": 0.3})


def test_a_search_stopped_before_its_proof_is_reported_feasible_with_the_solvers_bound() -> None:
    """Structural: whatever stopped the solver (CBC's limit, where PuLP still says 'Optimal'), an
    unproven result must not come back optimal; no clock decides whether this test runs its case."""
    problem = Problem(**HARD)
    inst = Instance.from_problem(problem)
    warm = ilp.warm_start(problem, inst, SolveOptions())
    assert warm is not None
    upper = objective_value(inst, warm)
    result = ilp_backends.RunResult("feasible", objective=upper, bound=0.9 * upper)
    schedule = ilp._answer(problem, inst, None, result, warm, 0.1)
    assert schedule.status == "feasible"
    assert schedule.lower_bound < schedule.objective_value


def test_limit_below_one_ops_allocation_is_infeasible_with_a_reason() -> None:
    schedule = solve(Problem(devices=2, microbatches=2, memory={"forward": 2, "backward_weight": -2, "limit": 1}), "ilp")
    assert schedule.status == "infeasible"
    assert "memory.limit" in schedule.reason and not schedule.ops


def test_single_microbatch_over_the_limit_is_infeasible_without_solving() -> None:
    # device 0 holds stages 0 and 2: F(0, i) and F(2, i) are both live before B(2, i) can run
    schedule = solve(Problem(devices=2, microbatches=2, stages_per_device=2, memory={"limit": 1}), "ilp")
    assert schedule.status == "infeasible"
    assert "single microbatch" in schedule.reason


def test_solver_proves_infeasible_when_no_order_fits_the_limit() -> None:
    # B frees more than F took (W takes some back), so the fast check cannot decide; but before
    # device 0's first F(2, .) only F(0, .) ops (+2 each) can run, so it starts at >= 2 + 2 > 3
    memory = {"forward": 2, "backward_input": -3, "backward_weight": 1, "limit": 3}
    schedule = solve(Problem(devices=2, microbatches=2, stages_per_device=2, memory=memory), "ilp",
                     SolveOptions(time_limit_s=30))
    assert schedule.status == "infeasible"
    assert "solver proved" in schedule.reason


def test_microbatch_relabelling_keeps_any_schedule_valid_with_the_same_figures() -> None:
    """The symmetry breaking's argument, checked: i-th earliest start of each (kind, stage) -> microbatch i."""
    rng = random.Random(7)
    for kwargs in list(SMALL_CASES.values())[:8]:
        problem = Problem(**{**kwargs, "memory": {**kwargs.get("memory", {}), "limit": None}})
        inst = Instance.from_problem(problem)
        times = best_times(inst, _random_order(inst, rng))
        relabelled = ilp_model.canonical_times(inst, times)
        schedule = finalize(problem, "test", relabelled, inst=inst)  # validates
        assert schedule.objective_value == pytest.approx(objective_value(inst, times), abs=1e-9)
        assert schedule.peak_memory == pytest.approx(peak_memory(inst, ilp_model.order_of(inst, times)), abs=1e-9)
        for (kind, stage, i), t in relabelled.items():
            if i:
                assert t >= relabelled[OpId(kind, stage, i - 1)]


def _fixed_order_lp(inst: Instance, order: list[list[OpId]]) -> float:
    """min stage_span for a fixed order, as a plain LP (independent of exact_times)."""
    pulp = ilp_model.pulp
    prob = pulp.LpProblem("fixed", pulp.LpMinimize)
    x = {op: ilp_model.new_var(prob, f"x{k}", 0) for k, op in enumerate(inst.ops())}
    z = ilp_model.new_var(prob, "z")
    prob += z
    for op in inst.ops():
        for pred, lag in inst.predecessors(op):
            prob += x[op] >= x[pred] + inst.cost(pred) + lag
    for ops in order:
        for a, b in zip(ops, ops[1:], strict=False):
            prob += x[b] >= x[a] + inst.cost(a)
        prob += z >= x[ops[-1]] + inst.cost(ops[-1]) - x[ops[0]]
    prob.solve(ilp_backends.cbc_solver(msg=False))
    return pulp.value(z)


def test_exact_times_reach_the_lp_optimum_of_a_fixed_order_under_stage_span() -> None:
    rng = random.Random(3)
    for kwargs in (SMALL_CASES["uneven-comm-span"], SMALL_CASES["v-shape"], SMALL_CASES["fused-span"], HARD):
        inst = Instance.from_problem(Problem(**{**kwargs, "objective": "stage_span"}))
        for _ in range(3):
            order = _random_order(inst, rng)
            assert objective_value(inst, best_times(inst, order)) == pytest.approx(_fixed_order_lp(inst, order), abs=1e-6)


def test_same_problem_gives_the_same_schedule_byte_for_byte() -> None:
    problem = Problem(**SMALL_CASES["fused-limit"])
    first, second = (solve(problem, "ilp", SolveOptions(time_limit_s=60)) for _ in range(2))
    dump = [json.dumps(s.model_dump(exclude={"solve_time_s"}), sort_keys=True) for s in (first, second)]
    assert dump[0] == dump[1]


def test_unknown_backend_is_refused_naming_the_option() -> None:
    from pipesched.solver import NotApplicableError

    with pytest.raises(NotApplicableError, match="options.backend 'gurobi'.*cbc, highs"):
        solve(Problem(devices=2, microbatches=2), "ilp", SolveOptions(backend="gurobi"))


def test_problems_too_large_for_the_model_are_refused_with_the_alternative() -> None:
    from pipesched.solver import NotApplicableError

    with pytest.raises(NotApplicableError, match="order pairs.*use cpsat or auto"):
        solve(Problem(devices=32, microbatches=256), "ilp")


def test_a_hint_is_used_as_the_warm_start() -> None:
    problem = Problem(**SMALL_CASES["v-shape-fused-limit"])  # heuristics reach 38, the optimum is 32
    best = _ilp("v-shape-fused-limit")
    inst = Instance.from_problem(problem)
    assert objective_value(inst, ilp.warm_start(problem, inst, SolveOptions())) > best.objective_value + TOL
    hinted = solve(problem, "ilp", SolveOptions(time_limit_s=0.01, hint=best))
    assert hinted.objective_value == pytest.approx(best.objective_value, abs=TOL)


def test_a_warm_start_an_ulp_below_a_bound_is_accepted() -> None:
    """Float sums put a warm-start value at 17.799999999999997 under a bound of 17.8: PuLP refused
    it with a ValueError before the ILP snapped such values inside their bounds."""
    problem = Problem.model_validate({
        "devices": 4, "microbatches": 2, "split_backward": False, "objective": "stage_span",
        "costs": {"forward": [1.8, 1.1, 1.6, 1.6], "backward_input": [1.7, 2.2, 2.3, 2.4],
                  "backward_weight": 1.0, "comm": 0.3},
        "memory": {"forward": 1.0, "backward_input": -1.0, "backward_weight": 0.0, "limit": 3.42},
    })
    schedule = solve(problem, "ilp", SolveOptions(time_limit_s=20))
    assert schedule.status == "optimal"
    assert validate(schedule) == []

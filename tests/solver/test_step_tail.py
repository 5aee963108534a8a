"""A step with a tail (costs.grad_sync, costs.optimizer): what every schedule reports, what the validator
refuses, and the exact models' optima against a brute force that shares no code with the solver (its
own op graph, earliest-start timing and sync lane, read from the problem's fields)."""

from __future__ import annotations

import itertools
from functools import cache
from pathlib import Path

import pytest

from pipesched.cli import main as cli_main
from pipesched.solver import Problem, Schedule, SolveOptions, methods, solve, validate
from pipesched.solver.timing.finalize import from_order

TAIL = {"grad_sync": [3.0, 1.0, 2.0, 4.0], "optimizer": [1.0, 2.0]}


def _problem(**kw: object) -> Problem:
    base: dict = {"devices": 2, "microbatches": 4, "stages_per_device": 2, "costs": {**TAIL, "comm": 0.5}}
    base.update(kw)
    return Problem.model_validate(base)


def _tail_of(schedule) -> tuple[list[float], float]:  # type: ignore[no-untyped-def]
    """Each device's step end and the pipeline end, recomputed from the ops alone (earliest release first)."""
    problem = schedule.problem
    p, v = problem.devices, problem.stages_per_device
    sync = problem.costs.grad_sync
    sync = sync if isinstance(sync, list) else [sync] * (p * v)
    opt = problem.costs.optimizer
    opt = opt if isinstance(opt, list) else [opt] * p
    kind = "W" if problem.split_backward else "B"
    ready: dict[int, float] = {}
    last = [0.0] * p
    for o in schedule.ops:
        last[o.device] = max(last[o.device], o.end)
        if o.kind == kind:
            ready[o.stage] = max(ready.get(o.stage, 0.0), o.end)
    ends = []
    for d in range(p):
        t = 0.0
        mine = [s for s in ready if s % p == d] if problem.placement == "loop" else \
            [s for s in ready if (s if s < p else 2 * p - 1 - s) == d]
        for s in sorted(mine, key=lambda s: (ready[s], s)):
            t = max(t, ready[s]) + sync[s]
        ends.append(max(t, last[d]) + opt[d])
    return ends, max(o.end for o in schedule.ops)


@pytest.mark.parametrize("objective", ["makespan", "stage_span"])
def test_every_method_reports_the_tail_its_ops_give(objective: str) -> None:
    problem = _problem(objective=objective)
    for m in methods():
        if m.applies(problem):
            continue
        schedule = solve(problem, m.name, SolveOptions(time_limit_s=2))
        if not schedule.ops:
            continue
        ends, pipeline = _tail_of(schedule)
        assert validate(schedule) == [], m.name
        assert schedule.pipeline_end == pytest.approx(pipeline) and schedule.step_end == pytest.approx(max(ends))
        assert schedule.makespan == pytest.approx(max(ends)), m.name
        if objective == "makespan":
            assert schedule.objective_value == pytest.approx(max(ends)), m.name
        else:
            first = [min(o.start for o in schedule.ops if o.device == d) for d in range(2)]
            assert schedule.objective_value == pytest.approx(max(e - f for e, f in zip(ends, first, strict=True)))
        assert len(schedule.syncs or []) == 4 and len(schedule.optimizer_steps or []) == 2


def test_a_problem_without_a_tail_reports_none_of_it() -> None:
    schedule = solve(_problem(costs={"comm": 0.5}), "greedy")
    text = schedule.model_dump_json()
    assert "pipeline_end" not in text and "syncs" not in text and validate(schedule) == []


def test_the_validator_refuses_a_tail_that_breaks_a_rule() -> None:
    good = solve(_problem(), "greedy")
    syncs, steps = list(good.syncs or []), list(good.optimizer_steps or [])
    early = syncs[0].model_copy(update={"start": 0.0, "end": syncs[0].end - syncs[0].start})
    cases = {
        "before its last W": good.model_copy(update={"syncs": [early, *syncs[1:]]}),
        "optimizer step starts": good.model_copy(update={"optimizer_steps": [
            steps[0].model_copy(update={"start": 0.0, "end": steps[0].end - steps[0].start}), *steps[1:]]}),
        "exactly one sync": good.model_copy(update={"syncs": syncs[1:]}),
        "gives no": good.model_copy(update={"syncs": None}),
        "sets no grad_sync": solve(_problem(costs={}), "greedy").model_copy(update={"syncs": syncs}),
    }
    for words, schedule in cases.items():
        assert any(words in e for e in validate(schedule)), (words, validate(schedule))


# ---- brute force: every per-device order in microbatch order, timed by its own earliest-start rules ----

def _ops(problem: Problem) -> list[tuple[str, int, int]]:
    kinds = "FBW" if problem.split_backward else "FB"
    S = problem.devices * problem.stages_per_device
    return [(k, s, i) for s in range(S) for i in range(problem.microbatches) for k in kinds]


def _per(value: object, n: int) -> list[float]:
    return list(value) if isinstance(value, list) else [float(value)] * n  # type: ignore[arg-type]


@cache
def brute_force(text: str) -> float:
    problem = Problem.model_validate_json(text)
    p, m = problem.devices, problem.microbatches
    S = p * problem.stages_per_device
    c = problem.costs
    fwd, bi, bw = _per(c.forward, S), _per(c.backward_input, S), _per(c.backward_weight, S)
    dur = {"F": fwd, "B": bi if problem.split_backward else [a + b for a, b in zip(bi, bw, strict=True)], "W": bw}
    sync, opt, comm = _per(c.grad_sync, S), _per(c.optimizer, p), float(c.comm)  # type: ignore[arg-type]
    home = [s % p for s in range(S)]

    def preds(op: tuple[str, int, int]) -> list[tuple[tuple[str, int, int], float]]:
        k, s, i = op
        if k == "F":
            return [(("F", s - 1, i), comm if home[s - 1] != home[s] else 0.0)] if s else []
        if k == "B":
            if s == S - 1:
                return [(("F", s, i), 0.0)]
            return [(("B", s + 1, i), comm if home[s + 1] != home[s] else 0.0)]
        return [(("B", s, i), 0.0)]

    def before(a: tuple[str, int, int], b: tuple[str, int, int]) -> bool:
        """A required order on one device: same microbatch and stage by kind, or same kind and stage by microbatch."""
        return (a[1] == b[1] and a[2] == b[2] and "FBW".index(a[0]) < "FBW".index(b[0])) or (
            a[0] == b[0] and a[1] == b[1] and a[2] < b[2])

    def extensions(ops: list[tuple[str, int, int]]) -> list[list[tuple[str, int, int]]]:
        if not ops:
            return [[]]
        out = []
        for k, op in enumerate(ops):
            if not any(before(o, op) for o in ops if o != op):
                out += [[op, *rest] for rest in extensions(ops[:k] + ops[k + 1:])]
        return out

    devices = [extensions([op for op in _ops(problem) if home[op[1]] == d]) for d in range(p)]
    kind = "W" if problem.split_backward else "B"
    best = float("inf")
    for orders in itertools.product(*devices):
        end: dict[tuple[str, int, int], float] = {}
        pos, free = [0] * p, [0.0] * p
        progress = True
        while progress:
            progress = False
            for d in range(p):
                while pos[d] < len(orders[d]):
                    op = orders[d][pos[d]]
                    ready = [end[q] + lag for q, lag in preds(op) if q in end]
                    if len(ready) < len(preds(op)):
                        break
                    end[op] = max([free[d], *ready]) + dur[op[0]][op[1]]
                    free[d] = end[op]
                    pos[d] += 1
                    progress = True
        if len(end) < sum(map(len, orders)):
            continue  # the orders wait on each other forever
        spans = []
        for d in range(p):
            lane = 0.0
            mine = [s for s in range(S) if home[s] == d]
            ready_at = {s: max(end[(kind, s, i)] for i in range(m)) for s in mine}
            for s in sorted(mine, key=lambda s: (ready_at[s], s)):
                lane = max(lane, ready_at[s]) + sync[s]
            step = max(lane, free[d]) + opt[d]
            first = min(end[op] - dur[op[0]][op[1]] for op in orders[d])
            spans.append(step - first if problem.objective == "stage_span" else step)
        best = min(best, max(spans))
    return best


SMALL = [
    Problem(devices=2, microbatches=3, costs={"forward": [1, 2], "grad_sync": [4, 1], "optimizer": [1, 3], "comm": 0.5}),
    Problem(devices=2, microbatches=3, objective="stage_span", costs={"grad_sync": [2, 5], "optimizer": 1}),
    Problem(devices=3, microbatches=2, split_backward=False, costs={"grad_sync": [3, 1, 2], "optimizer": [2, 0, 1]}),
    Problem(devices=2, microbatches=2, costs={"backward_weight": 2, "grad_sync": 6, "optimizer": 0.5}),
]


@pytest.mark.parametrize("problem", SMALL, ids=lambda p: f"p{p.devices}m{p.microbatches}-{p.objective}")
def test_exact_optima_and_bounds_match_a_brute_force_of_the_step(problem: Problem) -> None:
    best = brute_force(problem.model_dump_json())
    for name in ("cpsat", "ilp", "auto"):
        schedule = solve(problem, name, SolveOptions(time_limit_s=10))
        assert schedule.status == "optimal", name
        assert schedule.objective_value == pytest.approx(best), name
        assert schedule.lower_bound is not None and schedule.lower_bound <= best + 1e-9


def test_the_sync_aware_answer_is_never_worse_than_the_sync_blind_one_timed_with_the_tail() -> None:
    for v, placement in ((2, "loop"), (2, "v")):
        base = {"devices": 4, "microbatches": 16, "stages_per_device": v, "placement": placement,
                "costs": {"forward": 0.5, "backward_input": 0.5, "backward_weight": 0.5, "comm": 0.05}}
        blind = solve(Problem.model_validate(base), "auto", SolveOptions(time_limit_s=4))
        aware_problem = Problem.model_validate({**base, "costs": {**base["costs"], "grad_sync": 4.0, "optimizer": 1.0}})
        timed = from_order(aware_problem, "blind", blind.order())
        aware = solve(aware_problem, "auto", SolveOptions(time_limit_s=4))
        assert aware.objective_value <= timed.objective_value + 1e-9
        assert aware.step_end - aware.pipeline_end <= timed.step_end - timed.pipeline_end + 1e-9


def test_the_cli_summary_says_how_much_of_the_step_follows_the_pipeline(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.json"
    path.write_text(_problem().model_dump_json())
    assert cli_main(["solve", str(path), "--method", "greedy", "-o", str(tmp_path / "s.json")]) == 0
    schedule = Schedule.model_validate_json((tmp_path / "s.json").read_text())
    assert f"step end {schedule.step_end:g} = pipeline end {schedule.pipeline_end:g}" in capsys.readouterr().err

"""Properties that must hold for every problem: methods emit valid schedules (or say why not),
the simulator and the validator agree, and the validator catches a broken rule."""

from __future__ import annotations

import os
import random

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pipesched.solver import (
    Instance,
    NotApplicableError,
    OpId,
    Problem,
    finalize,
    get_method,
    simulate,
    solve,
    validate,
)
from pipesched.solver.core.metrics import peak_memory
from pipesched.solver.heuristics.greedy import POLICIES, greedy_schedule

MINE = ("gpipe", "1f1b", "interleaved-1f1b", "looped-bfs", "zb-h1", "zb-h2", "zb-v", "dualpipe-v", "greedy")
COSTS = st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.0])
#: Modest by default (suite budget); raise PIPESCHED_HYPOTHESIS_EXAMPLES for a deeper search.
EXAMPLES = int(os.environ.get("PIPESCHED_HYPOTHESIS_EXAMPLES", "60"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def problems(draw: st.DrawFn, *, limits: bool = True) -> Problem:
    """Small valid problems: both placements, split or fused, uneven stages, comm, memory caps."""
    p = draw(st.integers(1, 4))
    placement = draw(st.sampled_from(["loop", "v"]))
    v = 2 if placement == "v" else draw(st.integers(1, 3))
    stages = p * v

    def per_stage(values: st.SearchStrategy[float]) -> float | list[float]:
        return draw(st.one_of(values, st.lists(values, min_size=stages, max_size=stages)))

    forward = [draw(st.sampled_from([0.5, 1.0, 2.0])) for _ in range(stages)]
    share = [draw(st.sampled_from([0.0, 0.5, 1.0])) for _ in range(stages)]  # of F freed by B
    memory: dict = {
        "forward": forward,
        "backward_input": [-f * a for f, a in zip(forward, share, strict=True)],
        "backward_weight": [-f * (1 - a) for f, a in zip(forward, share, strict=True)],
    }
    if limits and draw(st.booleans()):
        memory["limit"] = draw(st.one_of(st.sampled_from([1.0, 2.0, 3.0, 4.0, 6.0, 8.0]),
                                         st.lists(st.sampled_from([2.0, 4.0, 8.0]), min_size=p, max_size=p)))
    return Problem(
        devices=p,
        microbatches=draw(st.integers(1, 6)),
        stages_per_device=v,
        placement=placement,
        split_backward=draw(st.booleans()),
        costs={
            "forward": per_stage(COSTS),
            "backward_input": per_stage(COSTS),
            "backward_weight": per_stage(COSTS),
            "comm": draw(st.sampled_from([0.0, 0.25, 1.0])),
        },
        memory=memory,
        objective=draw(st.sampled_from(["makespan", "stage_span"])),
    )


def one_microbatch_fits(inst: Instance) -> bool:
    need = [sum(max(0.0, inst.delta[k][s]) for k in inst.kinds for s in stages) for stages in inst.stages_of_device]
    return all(n <= cap for n, cap in zip(need, inst.limit, strict=True))


@SETTINGS
@given(problems())
def test_every_applicable_method_emits_a_valid_schedule_or_says_why_not(problem: Problem) -> None:
    for name in MINE:
        if get_method(name).applies(problem):
            continue
        try:
            schedule = solve(problem, name)
        except NotApplicableError as error:
            assert "memory" in str(error)  # fixed recipes only refuse over the limit
            assert name != "greedy" or not one_microbatch_fits(Instance.from_problem(problem))
            continue
        if schedule.status == "infeasible":  # greedy, as the exact methods, proves a cap nothing fits
            assert not one_microbatch_fits(Instance.from_problem(problem)) and schedule.reason
            continue
        assert validate(schedule) == []
        assert schedule.lower_bound <= schedule.objective_value + 1e-9


@SETTINGS
@given(problems(), st.sampled_from(sorted(POLICIES)))
def test_greedy_respects_any_limit_one_microbatch_fits_in(problem: Problem, policy: str) -> None:
    inst = Instance.from_problem(problem)
    assume(one_microbatch_fits(inst))  # under a cap no microbatch fits in, greedy is not asked to fit it
    order, start = greedy_schedule(inst, policy=policy)
    assert sorted(op for ops in order for op in ops) == sorted(inst.ops())
    assert start == simulate(inst, order)  # its times are the earliest for its order (and no deadlock)
    peaks = peak_memory(inst, order)
    assert all(peak <= cap + 1e-9 for peak, cap in zip(peaks, inst.limit, strict=True))


def random_order(inst: Instance, seed: int) -> list[list[OpId]]:
    """A random per-device order that respects every dependency (a random linear extension)."""
    rng = random.Random(seed)
    ready = [op for op in inst.ops() if not inst.predecessors(op)]
    order: list[list[OpId]] = [[] for _ in range(inst.devices)]
    while ready:
        op = ready.pop(rng.randrange(len(ready)))
        order[inst.device(op)].append(op)
        ready += [succ for succ, _ in inst.successors(op)]  # each op has exactly one predecessor
    return order


@SETTINGS
@given(problems(limits=False), st.integers(0, 2**32 - 1))
def test_simulated_times_of_any_topological_order_validate(problem: Problem, seed: int) -> None:
    inst = Instance.from_problem(problem)
    start = simulate(inst, random_order(inst, seed))
    assert validate(finalize(problem, "random", start, inst=inst)) == []


@SETTINGS
@given(problems(limits=False), st.integers(0, 2**32 - 1), st.sampled_from(["dependency", "overlap"]))
def test_validator_reports_a_broken_rule(problem: Problem, seed: int, rule: str) -> None:
    inst = Instance.from_problem(problem)
    schedule = finalize(problem, "random", simulate(inst, random_order(inst, seed)), inst=inst)
    rng = random.Random(seed)
    ops = {o.id: o for o in schedule.ops}
    if rule == "dependency":
        candidates = [op for op in ops if inst.predecessors(op)]
        assert candidates  # every B follows an F
        victim = rng.choice(candidates)
        pred, lag = inst.predecessors(victim)[0]
        new_start = ops[pred].end + lag - 1.0  # one time unit too early
    else:
        pairs = [(a, b) for per in schedule.order() for a, b in zip(per, per[1:], strict=False) if inst.cost(a) > 0]
        assume(pairs)  # every op that precedes another on its device costs 0: nothing can overlap
        a, victim = rng.choice(pairs)
        new_start = ops[a].end - inst.cost(a) / 2  # starts while its neighbour still runs
    moved = ops[victim].model_copy(update={"start": new_start, "end": new_start + inst.cost(victim)})
    broken = schedule.model_copy(update={"ops": [moved if o.id == victim else o for o in schedule.ops]})
    errors = validate(broken, limit=1000)
    assert any(str(victim) in e for e in errors), errors

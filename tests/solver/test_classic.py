"""The classic recipes and the greedy scheduler: published closed forms, memory peaks, applicability.

Closed forms are per-device spans (the ``stage_span`` objective, the papers' convention) with
uniform costs and no comm; ``F``, ``B``, ``W`` are per-stage costs.
"""

from __future__ import annotations

import pytest

from pipesched.solver import (
    Instance,
    NotApplicableError,
    Problem,
    get_method,
    simulate,
    solve,
    validate,
)
from pipesched.solver.core.metrics import makespan, peak_memory
from pipesched.solver.heuristics.greedy import POLICIES, greedy_order

MINE = ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zb-v", "dualpipe-v", "greedy")


def uniform(p: int, m: int, f: float = 1.0, b: float = 1.0, w: float = 1.0, **fields: object) -> Problem:
    return Problem(
        devices=p,
        microbatches=m,
        costs={"forward": f, "backward_input": b, "backward_weight": w},
        objective="stage_span",
        **fields,
    )


def span(problem: Problem, method: str) -> float:
    schedule = solve(problem, method)
    assert validate(schedule) == []
    return schedule.objective_value


PM = [(2, 2), (2, 5), (3, 3), (3, 7), (4, 4), (4, 8), (4, 13), (6, 12)]


# ---------------------------------------------------------------- 1F1B and GPipe
@pytest.mark.parametrize(("p", "m"), [*PM, (4, 1), (4, 2), (6, 3)])
@pytest.mark.parametrize("method", ["1f1b", "gpipe"])
def test_fused_backward_spans_m_plus_p_minus_one_rounds(method: str, p: int, m: int) -> None:
    # The classic (m + p - 1)(F + B + W) holds for a fused backward (B and W one op, as in the
    # papers' figures), for every m.
    assert span(uniform(p, m, split_backward=False), method) == pytest.approx((m + p - 1) * 3.0)


@pytest.mark.parametrize(("p", "m"), [(p, m) for p, m in PM if m >= p])
def test_1f1b_with_w_right_after_b_saves_p_minus_one_ws(p: int, m: int) -> None:
    # Split but W right after its B: the B chain travels at speed B, not B + W, so the first device
    # waits (p - 1) W less than the fused closed form: m(F+B+W) + (p-1)(F+B), for m >= p.
    f, b, w = 1.0, 2.0, 0.5
    assert span(uniform(p, m, f, b, w), "1f1b") == pytest.approx(m * (f + b + w) + (p - 1) * (f + b))
    assert span(uniform(p, m, f, b, w), "1f1b") < (m + p - 1) * (f + b + w)


@pytest.mark.parametrize(("p", "m"), PM)
def test_1f1b_peaks_at_p_microbatches_and_gpipe_at_m(p: int, m: int) -> None:
    assert solve(uniform(p, m), "1f1b").peak_memory == [float(min(m, p - d)) for d in range(p)]
    assert solve(uniform(p, m), "gpipe").peak_memory == [float(m)] * p


# ---------------------------------------------------------------- ZB-H1 / ZB-H2
# The paper's closed forms assume the steady state is reached and that W is the shortest pass:
# W <= F and W <= B, m >= p (ZB-H1), m >= 2p - 1 (ZB-H2).
COSTS = [(1.0, 1.0, 1.0), (1.5, 1.0, 0.5), (1.0, 2.0, 1.0), (2.0, 2.0, 1.0)]


@pytest.mark.parametrize(("f", "b", "w"), COSTS)
@pytest.mark.parametrize(("p", "m"), [(p, m) for p, m in PM if m >= p])
def test_zb_h1_span_is_m_rounds_plus_p_minus_one_f_plus_b_minus_w(p: int, m: int, f: float, b: float, w: float) -> None:
    problem = uniform(p, m, f, b, w)
    assert span(problem, "zb-h1") == pytest.approx(m * (f + b + w) + (p - 1) * (f + b - w))
    assert max(solve(problem, "zb-h1").peak_memory) == p  # 1F1B's peak


@pytest.mark.parametrize(("f", "b", "w"), COSTS)
@pytest.mark.parametrize(("p", "m"), [(2, 3), (2, 6), (3, 5), (3, 9), (4, 7), (4, 12), (5, 10)])
def test_zb_h2_span_is_m_rounds_plus_p_minus_one_f_plus_b_minus_two_w(
    p: int, m: int, f: float, b: float, w: float
) -> None:
    problem = uniform(p, m, f, b, w)
    assert span(problem, "zb-h2") == pytest.approx(m * (f + b + w) + (p - 1) * (f + b - 2 * w))
    assert max(solve(problem, "zb-h2").peak_memory) <= 2 * p - 1


@pytest.mark.parametrize("m", [1, 2, 3, 5, 8])
def test_zb_h2_stays_within_2p_minus_1_for_any_m(m: int) -> None:
    assert max(solve(uniform(4, m), "zb-h2").peak_memory) <= 2 * 4 - 1


# ---------------------------------------------------------------- interleaved 1F1B
@pytest.mark.parametrize("v", [2, 3])
@pytest.mark.parametrize(("p", "groups"), [(2, 1), (2, 3), (3, 2), (4, 1), (4, 2)])
def test_interleaved_bubble_shrinks_v_times(p: int, groups: int, v: int) -> None:
    # Megatron's regime: m a multiple of p, fused backward. Per device work m v (f + b), bubble
    # (p - 1)(f + b) = (p - 1)(F + B) / v in whole-device costs F = v f.
    m = groups * p
    problem = uniform(p, m, split_backward=False, stages_per_device=v)
    assert span(problem, "interleaved-1f1b") == pytest.approx(m * v * 3.0 + (p - 1) * 3.0)


@pytest.mark.parametrize("m", [1, 3, 5, 7])
def test_interleaved_takes_microbatch_counts_megatron_rejects(m: int) -> None:
    schedule = solve(uniform(4, m, stages_per_device=2), "interleaved-1f1b")
    assert validate(schedule) == []


# ---------------------------------------------------------------- ZB-V
@pytest.mark.parametrize(("p", "m"), [(2, 4), (2, 7), (3, 6), (4, 8), (4, 11)])
def test_zb_v_has_no_bubble_with_equal_costs_and_1f1b_peak(p: int, m: int) -> None:
    problem = uniform(p, m, stages_per_device=2, placement="v")
    assert span(problem, "zb-v") == pytest.approx(2 * m * 3.0)  # exactly the per-device work
    assert max(solve(problem, "zb-v").peak_memory) == 2 * p  # p whole-model activations, like 1F1B


@pytest.mark.parametrize("split", [True, False])
@pytest.mark.parametrize(("p", "m"), [(2, 4), (3, 6), (4, 8), (4, 13)])
def test_dualpipe_v_holds_2p_plus_1_chunks_and_only_pays_the_ramp(p: int, m: int, split: bool) -> None:
    # Without DualPipe's F/B overlap (one op at a time here) its span is the work plus a ramp of
    # less than one microbatch's trip through the pipeline.
    problem = uniform(p, m, stages_per_device=2, placement="v", split_backward=split)
    work = 2 * m * 3.0
    assert work <= span(problem, "dualpipe-v") < work + 2 * p * 3.0
    assert max(solve(problem, "dualpipe-v").peak_memory) <= 2 * p + 1


# ---------------------------------------------------------------- every method
def default_for(method: str, p: int = 4, m: int = 8, **fields: object) -> Problem:
    placement, v = {"interleaved-1f1b": ("loop", 2), "zb-v": ("v", 2), "dualpipe-v": ("v", 2)}.get(method, ("loop", 1))
    return Problem(devices=p, microbatches=m, placement=placement, stages_per_device=v, **fields)


@pytest.mark.parametrize("method", MINE)
@pytest.mark.parametrize(("p", "m"), [(2, 1), (4, 8), (3, 7), (5, 3)])
def test_makespan_is_never_below_ramp_plus_last_device_work(method: str, p: int, m: int) -> None:
    # The last device cannot start before (p - 1) forwards have run, then does all its work.
    problem = default_for(method, p, m, costs={"forward": 1.0, "backward_input": 1.5, "backward_weight": 0.5})
    v = problem.stages_per_device
    assert solve(problem, method).makespan >= (p - 1) * 1.0 + m * v * 3.0 - 1e-9


@pytest.mark.parametrize("method", MINE)
def test_each_method_solves_the_default_problem(method: str) -> None:
    schedule = solve(default_for(method), method)
    assert schedule.method == method and validate(schedule) == []


@pytest.mark.parametrize("method", MINE)
def test_uneven_stages_comm_and_few_microbatches_validate(method: str) -> None:
    base = default_for(method)
    stages = base.num_stages
    problem = base.model_copy(
        update={
            "microbatches": 3,
            "costs": base.costs.model_copy(
                update={
                    "forward": [1.0 + 0.5 * (s % 3) for s in range(stages)],
                    "backward_input": [2.0 - 0.25 * (s % 2) for s in range(stages)],
                    "backward_weight": [0.5 + 0.1 * s for s in range(stages)],
                    "comm": 0.3,
                }
            ),
        }
    )
    schedule = solve(Problem.model_validate(problem.model_dump()), method)
    assert validate(schedule) == []


@pytest.mark.parametrize(
    ("method", "fields", "reason"),
    [
        ("zb-h1", {"split_backward": False}, "needs split_backward"),
        ("zb-h2", {"stages_per_device": 2}, "needs stages_per_device = 1"),
        ("1f1b", {"stages_per_device": 2, "placement": "v"}, "needs stages_per_device = 1"),
        ("interleaved-1f1b", {}, "needs placement 'loop' with stages_per_device >= 2"),
        ("zb-v", {"stages_per_device": 2}, "needs placement 'v'"),
        ("zb-v", {"stages_per_device": 2, "placement": "v", "split_backward": False}, "needs split_backward"),
        ("dualpipe-v", {"stages_per_device": 2}, "needs placement 'v'"),
    ],
)
def test_methods_say_why_they_do_not_apply(method: str, fields: dict, reason: str) -> None:
    problem = Problem(devices=4, microbatches=8, **fields)
    assert reason in (get_method(method).applies(problem) or "")
    with pytest.raises(NotApplicableError, match=reason):
        solve(problem, method)


def test_fixed_recipe_over_the_limit_is_not_applicable_but_greedy_fits() -> None:
    problem = Problem(devices=4, microbatches=8, memory={"limit": 3})
    with pytest.raises(NotApplicableError, match="above memory.limit 3"):
        solve(problem, "zb-h2")
    schedule = solve(problem, "greedy")
    assert max(schedule.peak_memory) <= 3 and validate(schedule) == []


# ---------------------------------------------------------------- greedy
@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize(
    ("fields", "limit"),
    [
        ({}, 1.0),  # one microbatch at a time
        ({"stages_per_device": 2}, 2.0),  # interleaved: both chunks of one microbatch
        ({"stages_per_device": 3}, 4.0),
        ({"stages_per_device": 2, "placement": "v"}, 3.0),
        ({"split_backward": False}, 2.0),
    ],
)
def test_greedy_never_deadlocks_at_tight_limits(policy: str, fields: dict, limit: float) -> None:
    inst = Instance.from_problem(Problem(devices=4, microbatches=9, memory={"limit": limit}, **fields))
    order = greedy_order(inst, policy=policy)
    simulate(inst, order)  # raises on deadlock
    assert max(peak_memory(inst, order)) <= limit


def test_greedy_rebuilds_zb_h1_under_1f1b_memory() -> None:
    problem = Problem(devices=4, microbatches=8, memory={"limit": 4})
    inst = Instance.from_problem(problem)
    order = greedy_order(inst, policy="alternate")
    assert makespan(inst, simulate(inst, order)) == solve(problem, "zb-h1").makespan == 27.0
    assert solve(problem, "greedy").makespan <= 27.0


@pytest.mark.parametrize(
    ("recipe", "policy", "fields"),
    [
        ("zb-h2", "follow-wide", {}),
        ("zb-h1", "follow-lean", {"costs": {"forward": 1.0, "backward_input": 2.0, "backward_weight": 0.5, "comm": 0.2}}),
        ("interleaved-1f1b", "follow-lean", {"stages_per_device": 2}),
        ("zb-v", "follow-lean", {"stages_per_device": 2, "placement": "v"}),
        ("dualpipe-v", "follow-wide", {"stages_per_device": 2, "placement": "v"}),
        ("dualpipe-v", "follow-lean", {"stages_per_device": 2, "placement": "v", "split_backward": False}),
    ],
)
def test_follow_policies_are_the_recipe_within_its_peak_and_bend_below_it(recipe: str, policy: str, fields: dict) -> None:
    problem = Problem(devices=4, microbatches=12, **fields)
    reference = solve(problem, recipe)
    peak = max(reference.peak_memory)
    for limit, check in ((peak, "same"), (peak - 1, "fits")):
        inst = Instance.from_problem(problem.model_copy(update={"memory": problem.memory.model_copy(update={"limit": limit})}))
        order = greedy_order(inst, policy=policy)
        if check == "same":
            assert makespan(inst, simulate(inst, order)) == pytest.approx(reference.makespan)
        assert max(peak_memory(inst, order)) <= limit


def test_greedy_reaches_the_makespan_bound_without_a_limit() -> None:
    problem = Problem(devices=8, microbatches=16)
    assert solve(problem, "greedy").makespan == (8 - 1) * 1.0 + 16 * 3.0


def test_greedy_says_which_device_cannot_hold_one_microbatch() -> None:
    problem = Problem(devices=2, microbatches=4, stages_per_device=2, memory={"limit": [2.0, 1.5]})
    schedule = solve(problem, "greedy")  # an answer (exit 1 on the CLI), as cpsat / ilp / auto give
    assert schedule.status == "infeasible" and "device 1" in (schedule.reason or "") and not schedule.ops
    with pytest.raises(NotApplicableError, match="needs 2 activation memory on device 1"):
        greedy_order(Instance.from_problem(problem))


def test_greedy_rejects_an_unknown_policy() -> None:
    with pytest.raises(NotApplicableError, match="unknown greedy policy 'fastest'; choose one of"):
        greedy_order(Instance.from_problem(Problem(devices=2, microbatches=2)), policy="fastest")


def test_greedy_respects_per_device_limits_with_uneven_deltas() -> None:
    problem = Problem(
        devices=3,
        microbatches=10,
        memory={"forward": [3.0, 1.0, 2.0], "backward_input": [-1.0, 0.0, 0.5], "backward_weight": [-2.0, -1.0, -2.5],
                "limit": [7.0, 2.0, 5.0]},
    )
    schedule = solve(problem, "greedy")
    assert all(peak <= cap for peak, cap in zip(schedule.peak_memory, [7.0, 2.0, 5.0], strict=True))


@pytest.mark.parametrize("method", ["greedy", "zb-h1", "1f1b"])
def test_zero_cost_ops_keep_their_order_through_the_schedule(method: str) -> None:
    # All ops at one instant: the schedule's order must still be the one the method ran (F before
    # its B, releases where the method put them), so memory checks and re-simulation agree.
    problem = Problem(
        devices=4,
        microbatches=3,
        costs={"forward": 0.0, "backward_input": 0.0, "backward_weight": 0.0},
        memory={"forward": 0.5, "backward_input": 0.0, "backward_weight": -0.5, "limit": 2.0},
    )
    schedule = solve(problem, method)
    assert validate(schedule) == []
    simulate(Instance.from_problem(problem), schedule.order())  # no deadlock on the round trip

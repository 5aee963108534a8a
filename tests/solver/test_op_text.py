"""The op text form reads back what it writes, and every consumer reads one op order."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipesched.solver import OpId, Problem, solve
from pipesched.solver.core.ops import dependency_rank, op_text, order_text, parse_op, parse_order
from pipesched.solver.formats.torch_csv import rank_programs, to_torch_csv

ops = st.builds(OpId, st.sampled_from(["F", "B", "W"]), st.integers(0, 999), st.integers(0, 9999))


@given(ops)
def test_an_op_reads_back_what_it_writes(op: OpId) -> None:
    assert parse_op(op_text(op)) == op


@given(st.lists(st.lists(ops, max_size=8), min_size=1, max_size=5))
def test_an_order_reads_back_what_it_writes(order: list[list[OpId]]) -> None:
    assert parse_order(order_text(order)) == order


def test_the_text_form_is_torchs_stage_kind_microbatch() -> None:
    assert op_text(OpId("F", 3, 7)) == "3F7"
    assert parse_op(" 12W0 ") == OpId("W", 12, 0)


@pytest.mark.parametrize("bad", ["F3.7", "3X7", "3F", "-1F0", "3f7", ""])
def test_a_malformed_op_is_refused_with_the_accepted_form(bad: str) -> None:
    with pytest.raises(ValueError, match="STAGE KIND MICROBATCH"):
        parse_op(bad)


def test_an_order_must_list_its_devices_in_order() -> None:
    with pytest.raises(ValueError, match="must start with '0:'"):
        parse_order("1: 0F0\n")


def test_a_solved_order_round_trips_through_text() -> None:
    schedule = solve(Problem(devices=2, microbatches=3, stages_per_device=2, placement="v"), "zb-v")
    assert parse_order(order_text(schedule.order())) == schedule.order()


def test_the_dependency_rank_puts_every_op_after_what_it_needs() -> None:
    S = 4
    for i in range(2):
        chain = [OpId("F", s, i) for s in range(S)] + [OpId("B", s, i) for s in reversed(range(S))]
        ranks = [dependency_rank(op, S) for op in chain]
        assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks)
        for s in range(S):
            assert dependency_rank(OpId("W", s, i), S) > dependency_rank(OpId("B", s, i), S)


def test_the_torch_csv_lists_each_device_in_the_schedules_own_order() -> None:
    """Zero-cost ops tie in time; the export must keep the order the schedule was validated in."""
    problem = Problem(devices=2, microbatches=3, costs={"forward": 1.0, "backward_input": 1.0,
                                                        "backward_weight": 0.0, "comm": 0.0})
    schedule = solve(problem, "zb-h1")
    assert rank_programs(schedule) == schedule.order()
    rows = to_torch_csv(schedule).splitlines()
    assert [r.split(",") for r in rows] == [[op_text(op).replace("B", "I") for op in ops] for ops in schedule.order()]

"""The wire-format oracle (``wire_oracle.py``) on problems worked by hand, and its validator on broken
schedules: an oracle that cannot be wrong in a test's eyes proves nothing."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import wire_oracle

from pipesched.solver import Problem


def chain(**memory: object) -> Problem:
    """p = 2, m = 1: F0 (1) -comm 0.5- F1 (2), B1 (3) -comm- B0 (4), W1 (0.5), W0 (0.25)."""
    return Problem(devices=2, microbatches=1,
                   costs={"forward": [1, 2], "backward_input": [4, 3], "backward_weight": [0.25, 0.5], "comm": 0.5},
                   memory={"forward": 1, "backward_input": -0.5, "backward_weight": -0.5, **memory})


def test_one_microbatch_is_its_chain() -> None:
    # F0 0-1, F1 1.5-3.5, B1 3.5-6.5, B0 7-11, W0 11-11.25 (W1 6.5-7 in the wait): makespan 11.25
    assert wire_oracle.optimum(chain()) == pytest.approx(11.25)
    # device 0 holds F0 .. W0: 0 .. 11.25; device 1 F1 .. W1: 1.5 .. 7 (5.5)
    assert wire_oracle.optimum(chain().model_copy(update={"objective": "stage_span"})) == pytest.approx(11.25)


def test_two_microbatches_under_a_cap_of_one_run_one_after_the_other() -> None:
    """p = 1, m = 2, F 1, B 2, W 1, each F holds 1 until its W: with a cap of 1 the second F waits
    for the first W (8 in a row); with 2 nothing waits (still 8: one device does all the work)."""
    one = Problem(devices=1, microbatches=2, costs={"forward": 1, "backward_input": 2, "backward_weight": 1},
                  memory={"limit": 1})
    assert wire_oracle.optimum(one) == pytest.approx(8)
    fused = one.model_copy(update={"split_backward": False})  # B does B and W: 3 each
    assert wire_oracle.optimum(fused) == pytest.approx(8)
    assert wire_oracle.optimum(one.model_copy(update={"memory": one.memory.model_copy(update={"limit": 0.5})})) is None


def test_the_graph_reads_placement_fusion_and_per_boundary_comm() -> None:
    v = Problem(devices=2, microbatches=2, stages_per_device=2, placement="v", split_backward=False,
                costs={"forward": [1, 2, 3, 4], "backward_input": 1, "backward_weight": 2, "comm": [0.1, 0.2, 0.3]})
    g = wire_oracle.graph(v)
    assert len(g.order) == v.num_ops == 16
    assert [g.device_of[wire_oracle.Op("F", s, 0)] for s in range(4)] == [0, 1, 1, 0]
    assert g.duration[wire_oracle.Op("B", 2, 1)] == 3  # fused: 1 + 2
    assert g.preds[wire_oracle.Op("F", 2, 0)] == ((wire_oracle.Op("F", 1, 0), 0),)  # the turn: one device
    assert g.preds[wire_oracle.Op("F", 3, 0)] == ((wire_oracle.Op("F", 2, 0), wire_oracle.Fraction(3, 10)),)
    dual = wire_oracle.graph(Problem(devices=2, microbatches=3, stages_per_device=2, placement="dual"))
    assert {op.microbatch for op in dual.order if op.stage >= 2} == {1, 2}  # m // 2 = 1 flows down
    with pytest.raises(NotImplementedError, match="step tail"):  # refused, never modelled wrong
        wire_oracle.graph(Problem(devices=2, microbatches=2, costs={"optimizer": 1.0}))


def test_the_validator_names_a_broken_dependency_an_overlap_and_a_cap() -> None:
    problem = chain(limit=1.5)
    ops = [wire_oracle.Op("F", 0, 0), wire_oracle.Op("F", 1, 0), wire_oracle.Op("B", 1, 0),
           wire_oracle.Op("B", 0, 0), wire_oracle.Op("W", 1, 0), wire_oracle.Op("W", 0, 0)]
    times = {"F": {0: 0, 1: 1.5}, "B": {1: 3.5, 0: 7}, "W": {1: 6.5, 0: 11}}
    g = wire_oracle.graph(problem)

    class Row:
        def __init__(self, op: wire_oracle.Op, start: float) -> None:
            self.kind, self.stage, self.microbatch = op
            self.device, self.start, self.end = g.device_of[op], start, start + float(g.duration[op])

    good = [Row(op, times[op.kind][op.stage]) for op in ops]
    assert wire_oracle.violations(problem, good, 11.25) == []
    assert any("objective" in e for e in wire_oracle.violations(problem, good, 11.0))
    early = [Row(op, 6.5 if op == ops[3] else times[op.kind][op.stage]) for op in ops]
    assert any("before B(1, 0) ends" in e for e in wire_oracle.violations(problem, early, 10.75))
    squeezed = [Row(op, 10 if op == ops[5] else times[op.kind][op.stage]) for op in ops]  # W0 inside B0
    assert any("overlap" in e for e in wire_oracle.violations(problem, squeezed, 11.0))
    tight = chain(limit=0.5)
    assert any("peak memory" in e for e in wire_oracle.violations(tight, good, 11.25))


def test_the_oracles_import_nothing_of_the_solver_but_the_problem_model() -> None:
    """``Instance``, the simulator or the validator in an oracle would share their mistakes with the solver."""
    here = Path(__file__).parent
    for name in ("wire_oracle.py", "bruteforce.py"):
        tree = ast.parse((here / name).read_text())
        used = [(n.module, [a.name for a in n.names]) for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("pipesched")]
        used += [(a.name, []) for n in ast.walk(tree) if isinstance(n, ast.Import)
                 for a in n.names if a.name.startswith("pipesched")]
        assert used == [("pipesched.solver", ["Problem"])], (name, used)

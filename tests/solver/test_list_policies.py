"""The named list policies are data with a provenance, and they are what the schedulers run."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pipesched.solver import Problem
from pipesched.solver.core.instance import Instance
from pipesched.solver.heuristics import greedy, interleaved_memory, v_greedy, v_memory, zb_policies
from pipesched.solver.heuristics.listsched.engine import Progress, run
from pipesched.solver.heuristics.listsched.policies import (
    GREEDY,
    INTERLEAVED,
    SETS,
    V_WIDE_GRID_ORDER,
    VM,
    VM_WIDE,
    ZB_HEAD,
    ILPolicy,
    V,
    VMPolicy,
    VPolicy,
)

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def test_every_set_names_the_command_and_the_cases_that_chose_it() -> None:
    assert len({s.name for s in SETS}) == len(SETS)
    for named in SETS:
        assert named.policies and named.chosen_by.command and named.chosen_by.cases
        assert "re-derivation pending" not in named.chosen_by.note


def test_the_schedulers_run_the_named_sets() -> None:
    assert tuple(greedy.POLICIES.values()) == GREEDY.policies
    assert ZB_HEAD.policies == zb_policies.HEAD
    assert V.policies == v_greedy.POLICIES
    assert VM.policies == v_memory.POLICIES and VM_WIDE.policies == v_memory.WIDE_GRID
    assert INTERLEAVED.policies == interleaved_memory.POLICIES
    assert len(VM_WIDE.policies) == 96  # 24 ranks x 2 W rules x with and without the turn's room


def test_the_engine_and_the_shared_commit_step_run_every_op_once() -> None:
    """A B-first rule on ``Progress`` (fused backward, no cap): each device runs its stage's F and B of
    every microbatch once, in microbatch order, and the engine counts them all."""
    inst = Instance.from_problem(Problem(devices=3, microbatches=4, split_backward=False))
    prog = Progress(inst)

    def choose(d: int) -> tuple[float, object]:
        ready = [(r, kind) for kind in ("B", "F") if (r := prog.arrival(kind, d)) is not None]
        if not ready:
            return math.inf, None
        r, kind = min(ready, key=lambda rk: (max(rk[0], prog.free[d]), rk[1] != "B"))
        return (prog.free[d], prog.next_op(kind, d)) if r <= prog.free[d] else (r, None)

    assert run(inst.devices, prog.free, choose, prog.commit) == inst.num_ops
    for ops in prog.order:
        for kind in ("F", "B"):
            assert [op.microbatch for op in ops if op.kind == kind] == list(range(inst.microbatches))


def _chosen(name: str) -> Any:
    return json.loads((RESULTS / f"tune_list_policies_{name}.json").read_text())["figures"]["chosen"]


def _policies(cls: type, name: str) -> tuple[Any, ...]:
    return tuple(cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}) for d in _chosen(name))


def test_the_sets_are_what_their_scripts_chose() -> None:
    """Each tuned set equals the choice its script recorded (benchmarks/results/*.json), so editing one
    by hand, or re-running a script without applying its choice, fails here."""
    assert V.policies == _policies(VPolicy, "v-greedy")
    assert VM.policies == _policies(VMPolicy, "v-memory")
    assert INTERLEAVED.policies == _policies(ILPolicy, "interleaved")
    assert tuple(_chosen("v-wide")) == V_WIDE_GRID_ORDER
    tables = json.loads((RESULTS / "tune_zb_policies.json").read_text())["tables"]
    head = next(t for t in tables if t["heading"].startswith("Chosen head"))
    column = head["columns"].index("policy")
    assert [row[column] for row in head["rows"]] == [f'`Policy({p.extra}, "{p.w}", scale={p.scale:g})`'
                                                     for p in ZB_HEAD.policies]

"""Same problem, same method, same budget: the same schedule byte for byte, in two fresh processes.

A proven optimum repeats by construction, so the case here is one that ``cpsat`` and ``auto`` do NOT
prove at this budget (status ``feasible``): the answer is whatever the search held when it stopped.
It repeats only when the search stopped on its *deterministic* budget (docs/solvers.md,
"Determinism"): this memory-capped unit-delta case is a precedences-only model, budgeted 0.12
deterministic units per nominal second while CP-SAT advances 0.15-0.17 per wall second on it, so
the deterministic limit ends the search at about three quarters of the wall limit on an idle machine
(measured here: about 1.4 s of a 3 s limit, even at a load average of 10). Each run's ``reason``
names any phase the wall clock cut; the test asserts there is none, so an identical pair is evidence
of determinism, not of two runs cut at the same moment.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pipesched.solver import Problem, SolveOptions, solve

CASE = dict(devices=4, microbatches=8, memory={"limit": 3}, objective="stage_span",
            costs={"forward": 1.0, "backward_input": 1.5, "backward_weight": 0.5, "comm": 0.25})
LIMIT_S = 3.0

_CHILD = """
import json, sys
from pipesched.solver import Problem, SolveOptions, solve
s = solve(Problem(**json.loads(sys.argv[1])), sys.argv[2], SolveOptions(time_limit_s=float(sys.argv[3])))
print(json.dumps(s.model_dump(mode="json", exclude={"solve_time_s"}), sort_keys=True))
"""


def _child(method: str) -> str:
    return subprocess.run([sys.executable, "-c", _CHILD, json.dumps(CASE), method, str(LIMIT_S)],
                          capture_output=True, text=True, check=True, timeout=120).stdout


@pytest.mark.parametrize("method", ["cpsat", "auto"])
def test_an_unproven_search_that_ends_on_its_deterministic_budget_repeats_across_processes(method: str) -> None:
    outs = [_child(method) for _ in range(2)]
    for out in outs:
        answer = json.loads(out)
        assert answer["status"] == "feasible", f"{method} proved this case; pick one it cannot prove: {answer['status']}"
        assert "wall clock" not in (answer.get("reason") or ""), (
            f"the wall clock, not the deterministic budget, ended a phase: {answer['reason']}")
    assert outs[0] == outs[1]
    again = solve(Problem(**CASE), method, SolveOptions(time_limit_s=LIMIT_S))
    assert json.dumps(again.model_dump(mode="json", exclude={"solve_time_s"}), sort_keys=True) + "\n" == outs[0]

"""The held-out set stays held out: drawn once, disjoint from the tuning and development sets, and no
solver code or test names one of its cases (docs/heldout.md states the rule this guards).

A case name in ``solver/`` or ``tests/`` means someone looked at that case while changing the solver
or pinned it as a test: the set is then no longer blind and a new one must be drawn (a new file, by
``benchmarks/heldout_draw.py`` with a new seed), not this one edited.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pipesched.solver import Problem

ROOT = Path(__file__).resolve().parent.parent
SET = ROOT / "benchmarks" / "heldout_cases.json"
sys.path.insert(0, str(ROOT / "benchmarks"))
import cases  # noqa: E402


def record() -> dict:
    return json.loads(SET.read_text())


def test_the_set_is_24_valid_problems_with_distinct_names() -> None:
    drawn = record()["cases"]
    assert len(drawn) == 24 and len({c["name"] for c in drawn}) == 24
    assert all(Problem.model_validate(c["problem"]).num_ops > 0 for c in drawn)


def test_it_shares_no_depth_and_no_cost_profile_with_the_tuning_and_development_sets() -> None:
    drawn = [Problem.model_validate(c["problem"]) for c in record()["cases"]]
    grids = (cases.TUNING_GRID, cases.TUNING_DEEP_GRID, cases.DEVELOPMENT_GRID, cases.V_TUNING_GRID,
             cases.INTERLEAVED_TUNING_GRID)
    other_p = {p for grid in grids for p, _ in grid}
    assert not {pr.devices for pr in drawn} & other_p
    assert not set(record()["models"]) & {prof.model for prof in cases.PROFILES}
    assert record()["seed"] not in (cases.TUNING_SEED, cases.TUNING_DEEP_SEED, cases.DEVELOPMENT_SEED,
                                    cases.V_TUNING_SEED, cases.INTERLEAVED_TUNING_SEED)


def test_the_family_tuning_sets_share_no_depth_pair_or_seed_with_the_development_set() -> None:
    """The V and interleaved tuning sets choose policy sets; the development set must not be one of them."""
    for grid in (cases.V_TUNING_GRID, cases.INTERLEAVED_TUNING_GRID):
        assert not set(grid) & set(cases.DEVELOPMENT_GRID)
    seeds = (cases.V_TUNING_SEED, cases.INTERLEAVED_TUNING_SEED)
    assert len(set(seeds)) == 2 and not set(seeds) & {cases.DEVELOPMENT_SEED, cases.TUNING_SEED}
    assert {c.problem.placement for c in cases.v_tuning()} == {"v"}
    assert {c.problem.stages_per_device for c in cases.interleaved_tuning()} == {2, 4}


def test_no_solver_file_or_test_names_a_held_out_case() -> None:
    names = [c["name"] for c in record()["cases"]]
    files = [f for folder in ("solver", "tests") for f in (ROOT / folder).rglob("*")
             if f.is_file() and f.suffix in (".py", ".json", ".md", ".txt") and f != Path(__file__)]
    found = [f"{f.relative_to(ROOT)}: {n}" for f in files for n in names if n in f.read_text(errors="replace")]
    assert not found, "held-out cases named in solver code or tests (draw a new set):\n" + "\n".join(found)


def test_the_file_was_committed_once_and_never_changed() -> None:
    log = subprocess.run(["git", "log", "--format=%h", "--", str(SET.relative_to(ROOT))], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, check=True).stdout.split()
    assert len(log) == 1, f"benchmarks/heldout_cases.json was changed after it was drawn: commits {log}"
    diff = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", str(SET.relative_to(ROOT))], cwd=ROOT, timeout=60)
    assert diff.returncode == 0, "benchmarks/heldout_cases.json differs from its commit"

"""``python benchmarks/run_all.py --full`` regenerates every results file the README and docs link to.

A results file no step writes goes stale without anyone noticing: its figures still pass
tests/test_readme_figures.py, but nobody re-measures them when the code changes.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import run_all  # noqa: E402


def test_every_linked_results_file_has_a_run_all_step() -> None:
    written = {r for step in run_all.STEPS for r in step.results} | set(run_all.SNAPSHOTS)
    missing = {name: pages for name, pages in run_all.linked_results().items() if name not in written}
    assert not missing, f"results files linked from these pages but written by no run_all step: {missing}"


def test_each_step_writes_where_its_command_says() -> None:
    """A step naming ``--out``/``-o`` writes that file, which must be the one it declares."""
    for step in run_all.STEPS:
        for flag in ("--out", "-o"):
            if flag in step.args:
                target = Path(step.args[step.args.index(flag) + 1]).name
                assert target in step.results, f"{step.name}: writes {target}, declares {step.results}"
        assert (ROOT / "benchmarks" / step.args[0]).is_file(), f"{step.name}: no script {step.args[0]}"


def test_full_plan_lists_every_step_once() -> None:
    names = [s.name for s in run_all.plan(True, "")]
    assert len(names) == len(set(names)) == len(run_all.STEPS)


def test_snapshots_exist_and_are_not_also_steps() -> None:
    written = {r for step in run_all.STEPS for r in step.results}
    for name, why in run_all.SNAPSHOTS.items():
        assert (ROOT / "benchmarks" / "results" / name).is_file(), f"snapshot {name} is missing"
        assert name not in written and why.strip(), name

"""Every results file the README or a docs page links names its commit, and the README's are current.

A figure measured on code many changes ago describes that code, not this one. So every linked
results file begins with ``commit: <sha>`` (machine and load after it; ``benchmarks/report.py``
writes them) and has a JSON of its figures beside it, and a file the README links came at most
``run_all.MAX_CODE_COMMITS`` commits touching ``solver/``, ``api/`` or ``runtime/`` ago (snapshots,
records of an earlier run that the docs quote as such, are exempt from that). A stale file is re-run
(``python benchmarks/run_all.py --stale``), not excused: ``run_all.RERUN_PENDING`` lists the files
whose re-run waits on a change in progress, and each must still be stale, so the list only shrinks.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import run_all  # noqa: E402
from report import read_header  # noqa: E402


def test_the_header_is_read_from_the_first_lines_only() -> None:
    page = "commit: abc1234\n\nload average (1 / 5 / 15 min): 1 before\n\nmachine: m\n\n# T\n\nmachine: not this\n"
    assert read_header(page) == {"commit": "abc1234", "load average (1 / 5 / 15 min)": "1 before", "machine": "m"}
    assert read_header("# T\n\ncommit: abc1234\n") == {}


def test_the_rule_counts_code_commits_since_the_named_one() -> None:
    head = run_all.code_commits_since("HEAD")
    assert head == 0
    assert run_all.code_commits_since("0" * 40) is None  # a commit this repository does not hold


def test_every_linked_results_file_is_current_or_pending_its_rerun() -> None:
    stale = run_all.stale()
    unexcused = {name: why for name, why in stale.items() if name not in run_all.RERUN_PENDING}
    assert not unexcused, ("linked results files that are not current; re-run them "
                           "(python benchmarks/run_all.py --stale --list shows the commands):\n"
                           + "\n".join(f"{n}: {'; '.join(w)}" for n, w in sorted(unexcused.items())))


def test_pending_files_are_still_stale_and_have_a_step() -> None:
    stale = run_all.stale()
    current = sorted(set(run_all.RERUN_PENDING) - set(stale))
    assert not current, f"re-run and current: remove from run_all.RERUN_PENDING: {current}"
    stepped = {r for step in run_all.STEPS for r in step.results}
    assert set(run_all.RERUN_PENDING) <= stepped

"""Killing a solve process kills what it started: PuLP's CBC runs as a child of the solve, and a
CBC left behind runs on to its time limit (the batch's SIGTERM test once saw one alive 10 s on)."""

from __future__ import annotations

import threading

from process_watch import group_members, wait_for

from pipesched.api.solving.runner import ProcessRunner
from pipesched.solver import Problem

#: CBC cannot prove this one quickly (uneven costs, a tight cap), so it is still running when killed.
SLOW = Problem.model_validate({
    "devices": 4, "microbatches": 12, "objective": "stage_span",
    "costs": {"forward": [1.0, 2.0, 1.5, 1.0], "backward_input": [2.0, 1.0, 1.0, 3.0],
              "backward_weight": [1.0, 1.0, 2.0, 1.0]},
    "memory": {"limit": 3}})


def test_kill_all_takes_the_solves_cbc_child_with_it() -> None:
    runner = ProcessRunner(kill_grace_s=5.0)
    answers: list[tuple[str, str]] = []
    thread = threading.Thread(target=lambda: answers.append(
        runner.run(SLOW.model_dump_json(), "ilp", 120.0, None)), daemon=True)
    thread.start()
    try:
        assert wait_for(lambda: any(p.pid for p in runner._live), 60)  # noqa: SLF001
        solve_pid = next(p.pid for p in runner._live if p.pid)  # noqa: SLF001
        # the solve leads its own group, and CBC (its child) is in it
        assert wait_for(lambda: any("cbc" in name.lower() for _, name in group_members(solve_pid)), 60), \
            group_members(solve_pid)
        runner.kill_all()
        thread.join(30)
        assert not thread.is_alive()
        assert answers and answers[0][0] in ("crashed", "killed"), answers
        assert wait_for(lambda: not group_members(solve_pid), 10), group_members(solve_pid)
    finally:
        runner.kill_all()

"""No solver outlives the service: ``kill -9`` of ``pipesched serve`` with solves in flight (CP-SAT,
and the ILP with its CBC child) leaves no process of it behind within seconds, forkserver included.

Before, the solver processes watched their parent, the forkserver, which stays alive while any of its
children holds its pipe: they ran on to their time limit (about a minute) after the service died."""

from __future__ import annotations

from api_servers import Server
from process_watch import _stats, busy_child, session_processes, wait_for

HARD_CPSAT = {  # keeps CP-SAT busy for its whole time limit (non-uniform v = 2 under a memory cap)
    "devices": 4, "microbatches": 12, "stages_per_device": 2, "objective": "stage_span",
    "costs": {"forward": [1.0, 1.3, 0.9, 1.1, 1.2, 0.8, 1.05, 1.15],
              "backward_input": [1.1, 1.0, 1.2, 0.9, 1.3, 1.0, 1.1, 0.95],
              "backward_weight": [0.7, 0.9, 0.8, 1.0, 0.6, 0.85, 0.75, 0.9], "comm": 0.1},
    "memory": {"forward": 1.0, "backward_input": 0.0, "backward_weight": -1.0, "limit": 5}}
SLOW_ILP = {  # CBC (a child of the solve process) cannot prove this one quickly
    "devices": 4, "microbatches": 12, "objective": "stage_span",
    "costs": {"forward": [1.0, 2.0, 1.5, 1.0], "backward_input": [2.0, 1.0, 1.0, 3.0],
              "backward_weight": [1.0, 1.0, 2.0, 1.0]},
    "memory": {"limit": 3}}


def _names(sid: int) -> list[str]:
    return [name for pid, name, _ in _stats() if pid in set(session_processes(sid))]


def test_kill_9_of_the_service_leaves_no_solver_process(make_server) -> None:  # noqa: ANN001
    server: Server = make_server().start()
    for problem, method in ((HARD_CPSAT, "cpsat"), (SLOW_ILP, "ilp")):
        r = server.post({"problem": problem, "method": method, "time_limit_s": 60, "wait_s": 0})
        assert r.status_code == 202, r.text
    sid = server.proc.pid
    # both solves are under way: a solver has used CPU, and CBC runs
    assert wait_for(lambda: busy_child(sid, 0.5) and any("cbc" in n.lower() for n in _names(sid)), 60), _names(sid)
    assert len(session_processes(sid)) >= 4  # service, forkserver, two solves (+ CBC)
    server.kill9()
    assert wait_for(lambda: not session_processes(sid), 3), _names(sid)

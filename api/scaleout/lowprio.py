"""A solve at a lower OS priority (``pipesched worker --nice N``): the body of the solve process.

On a host that also runs an API replica (or anything a person waits on), solves are the work that
can wait: ``nice`` 10 gives them about a tenth of a core's share against a normal-priority
process that wants it (Linux CFS weights 110 vs 1024) while still using every idle cycle, so cache
hits stay fast while the workers saturate the machine. Only the solve process is niced; the
worker's own loop (claims, heartbeats) keeps normal priority, so a busy host does not starve the
heartbeats and have its jobs taken over. ``--nice 0`` turns it off.
"""

from __future__ import annotations

import os
from multiprocessing.connection import Connection

from ..solving import worker


def run_solve_niced(conn: Connection, nice: int, problem_json: str, method: str, time_limit_s: float,
                    hint_json: str | None, workers: int) -> None:
    if nice > 0:
        os.nice(nice)
    worker.run_solve(conn, problem_json, method, time_limit_s, hint_json, workers)

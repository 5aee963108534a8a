"""Scale-out mode: solve jobs in PostgreSQL that any replica can see, run by workers on any host.

``pipesched serve --db postgresql://... --workers external`` enqueues each cache miss instead of
forking a solver; ``pipesched worker --db postgresql://...`` (any number, any host) claims and
solves them. The embedded default (SQLite, local solver processes) does not import this package.

- :mod:`.queue`: pgqueuer's queue (dedupe, priority, heartbeats) behind a reconnecting handle;
- :mod:`.jobtable`: the job records ``GET /v1/jobs/{id}`` reads (state, attempts, reason);
- :mod:`.front`: the replica's side (enqueue, wait, report);
- :mod:`.worker`: the worker loop (claim, solve in a killable process, store, heartbeat);
- :mod:`.cli`: ``pipesched worker``.

Needs the ``scaleout`` extra (``pip install 'pipesched[scaleout]'``). Deployment: docs/scale-out.md.
"""

#: Header a batch client sends so its solves queue behind interactive ones (value ``batch``).
PRIORITY_HEADER = "x-pipesched-priority"

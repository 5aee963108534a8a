"""pipesched.api: the schedule service, its cache, and offline batch solving.

``app`` wires the FastAPI routes (``routes/``, ``page``) to a :class:`~pipesched.api.store.Store`
(SQLAlchemy: SQLite or PostgreSQL) behind an in-process memo (``cache``) and a
:class:`~pipesched.api.solving.jobs.JobManager` running each solve in a killable process (``solving/``).
``cli`` adds ``pipesched serve`` and ``pipesched batch``. The client lives in
:mod:`pipesched.client` and imports none of this.
"""

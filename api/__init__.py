"""pipesched.api: the schedule service, its cache, and offline batch solving.

Three layers and their helpers, each a package: ``http`` (routes, FastAPI dependencies, the ASGI
layers in front), ``services`` (admission, which cache entry answers, solving and planning jobs; no
HTTP), ``store`` (the SQLAlchemy store, SQLite or PostgreSQL, behind an in-process memo). ``solving``
runs each solve in a killable process; ``scaleout`` moves the jobs to PostgreSQL for
``pipesched worker`` processes; ``batch`` is the offline ``pipesched batch``. ``app`` wires them,
``cli`` adds ``pipesched serve`` and ``pipesched batch``. The client lives in
:mod:`pipesched.client` and imports none of this.
"""

"""The schedule store (SQLAlchemy: SQLite or PostgreSQL) and the in-process memo in front of it.

:mod:`.entries` holds the table and its rules (keep the better schedule, decided in the database);
:mod:`.cache` keeps recent entries in memory so a cache hit costs no database round trip. Nothing
here knows about HTTP.
"""

from .cache import Cache, Hit
from .entries import FINAL_STATUSES, Entry, Store
from .errors import StoreUnavailable

__all__ = ["FINAL_STATUSES", "Cache", "Entry", "Hit", "Store", "StoreUnavailable"]

"""The state shared by every request: created and closed by the app's lifespan."""

from __future__ import annotations

from dataclasses import dataclass

from .cache import BodyMemo, Cache
from .metrics import Metrics
from .settings import Settings
from .solving.jobs import JobManager
from .store import Store


@dataclass
class Service:
    settings: Settings
    store: Store
    cache: Cache
    metrics: Metrics
    jobs: JobManager
    accepted: BodyMemo

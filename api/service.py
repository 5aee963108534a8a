"""The state shared by every request: created and closed by the app's lifespan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .cache import BodyMemo, Cache
from .metrics import Metrics
from .settings import Settings
from .solving.jobs import JobManager
from .store import Store

if TYPE_CHECKING:  # the scale-out package needs its extra; the embedded default never imports it
    from .scaleout.front import ExternalJobs


@dataclass
class Service:
    settings: Settings
    store: Store
    cache: Cache
    metrics: Metrics
    jobs: JobManager
    accepted: BodyMemo
    external: ExternalJobs | None = None  # set with --workers external

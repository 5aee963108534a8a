"""The state shared by every request: created and closed by the app's lifespan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..settings import Settings
from ..store import Cache, Store
from .accept import BodyMemo
from .health import Health
from .jobs import JobManager
from .metrics import Metrics
from .plan import PlanJobs

if TYPE_CHECKING:  # the scale-out package needs its extra; the embedded default never imports it
    from ..scaleout.front import ExternalJobs


@dataclass
class Service:
    settings: Settings
    store: Store
    cache: Cache
    metrics: Metrics
    jobs: JobManager
    plans: PlanJobs
    accepted: BodyMemo
    health: Health
    external: ExternalJobs | None = None  # set with --workers external

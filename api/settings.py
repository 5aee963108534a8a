"""Service settings, read from the environment (``PIPESCHED_*``) and overridden by CLI flags.

The service's own caps on problems (``PIPESCHED_SERVICE_MAX_DEVICES``, ...) are policy: a
request over one gets a 422 naming the cap. They are separate from the library's sanity bounds
(:class:`pipesched.solver.ProblemCaps`, ``PIPESCHED_MAX_DEVICES``, ...), which the problem model
checks everywhere and which should stay at least as large.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipesched.solver.core.problem import ProblemCaps

#: ``scheme://user:password@``: the password is what :func:`mask_url` hides.
_CREDENTIALS = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:)(?P<secret>[^@\s]*)@")


def mask_url(url: str) -> str:
    """``url`` (or any text holding URLs) with each password shown as ``***``: what every message,
    error line and log line prints instead of a database URL."""
    return _CREDENTIALS.sub(lambda m: m["head"] + "***@", url)


def scrub(text: str, url: str) -> str:
    """``text`` (a library's error message, say) with ``url``'s password masked wherever it appears."""
    found = _CREDENTIALS.search(url)
    text = mask_url(text)
    return text.replace(found["secret"], "***") if found and found["secret"] else text


def default_db_url() -> str:
    return f"sqlite:///{Path.home() / '.local' / 'share' / 'pipesched' / 'cache.db'}"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PIPESCHED_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = 8000
    db: str = Field(default_factory=default_db_url, description="SQLAlchemy URL: sqlite:///path or postgresql://...")
    table_prefix: str = Field("", description="Prefix of the store's table names (several caches in one database).")
    token: str | None = Field(None, description="Bearer token required on POST; None leaves the service open.")

    service_max_devices: int = 256
    service_max_microbatches: int = 1024
    service_max_stages_per_device: int = 16
    service_max_ops: int = 200_000
    max_time_limit_s: float = 300.0
    max_wait_s: float = 120.0
    default_time_limit_s: float = 10.0
    default_wait_s: float = 30.0

    workers: Literal["local", "external"] = Field(
        "local", description="local: solver processes of this replica; external: 'pipesched worker' processes "
        "through the PostgreSQL queue (docs/scale-out.md).")
    job_retention_s: float = Field(
        86400.0, ge=60.0, description="--workers external: how long finished job records (and pgqueuer's log) "
        "are kept for GET /v1/jobs/{id}; the schedules stay in the cache (docs/scale-out.md).")
    max_concurrent_solves: int = Field(2, description="Solver processes running at once.")
    max_queued_solves: int = Field(32, description="Distinct solves waiting for a process; more is refused with 429.")
    kill_grace_s: float = Field(5.0, description="A solve is killed at time_limit_s + kill_grace_s wall-clock.")
    threads: int = Field(64, ge=4, description="Threads for store calls and waits on solver processes.")
    max_body_bytes: int = 256 * 1024
    header_timeout_s: float = Field(10.0, gt=0, description="A request head not complete this long after its "
                                    "first byte closes the connection.")
    body_timeout_s: float = Field(20.0, gt=0, description="A request body not complete this long after its "
                                  "head gets 408 and the connection is closed.")
    max_connections: int = Field(1024, ge=1, description="Connections at once; one more is answered 503 "
                                 "(Retry-After) and closed.")
    finished_jobs_kept: int = 1024
    memo_entries: int = 4096
    memo_ttl_s: float = Field(5.0, description="How long a non-final entry is served from memory before re-reading the store.")

    @property
    def caps(self) -> ProblemCaps:
        return ProblemCaps(
            max_devices=self.service_max_devices,
            max_microbatches=self.service_max_microbatches,
            max_stages_per_device=self.service_max_stages_per_device,
            max_ops=self.service_max_ops,
        )

"""``pipesched worker``: run solves from the shared PostgreSQL queue (the scale-out mode)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from typing import Any

from pydantic import ValidationError

from pipesched.solver.core.io import InputError, describe_validation_error

from ..settings import mask_url, scrub


def register(sub: Any) -> None:
    worker = sub.add_parser(
        "worker",
        help="run solves queued by 'pipesched serve --workers external' (needs pipesched[scaleout])",
        description="Claim solve jobs from the PostgreSQL queue shared with 'pipesched serve --workers external' "
        "replicas, run each in its own process killed at time_limit_s + grace, and store the schedules in "
        "the shared cache. Run any number, on any host. Settings also come from PIPESCHED_* variables.",
    )
    worker.add_argument("--db", default=None, help="postgresql://user@host/db (or PIPESCHED_DB)")
    worker.add_argument("--concurrency", type=int, default=1, help="solves at once in this worker (default 1)")
    worker.add_argument("--max-attempts", type=int, default=3,
                        help="attempts before a job whose workers keep dying is failed (default 3)")
    worker.add_argument("--heartbeat-timeout", type=float, default=10.0,
                        help="seconds without a heartbeat before another worker takes a job over (default 10)")
    worker.add_argument("--nice", default="idle",
                        help="OS priority of the solve processes: 'idle' (an idle CPU cgroup where cgroups are "
                        "writable, else Linux SCHED_IDLE: cycles nothing else wants, the default: a replica on the "
                        "same host is served first) or 0-19 (nice); the "
                        "worker's own loop stays at normal priority (default idle)")
    worker.add_argument("--retention", type=float, default=None,
                        help="seconds finished job records are kept for GET /v1/jobs/{id}, at least 60 "
                        "(default 86400, or PIPESCHED_JOB_RETENTION_S); the schedules stay in the cache")
    worker.add_argument("--log-level", default="warning", help="log level (default warning)")
    worker.set_defaults(handler=_worker)


def _worker(args: argparse.Namespace) -> int:
    from ..settings import Settings

    if args.retention is not None and not args.retention >= 60:
        raise InputError(f"--retention must be >= 60 seconds (got {args.retention:g}): a client polling a "
                         "finished job needs time to read it")
    from .lowprio import parse_nice

    try:
        nice = parse_nice(args.nice)
    except ValueError as e:
        raise InputError(f"--nice {e}") from None
    overrides = {"db": args.db, "job_retention_s": args.retention}
    try:
        settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as e:
        raise InputError(f"settings (flags or PIPESCHED_* variables): {describe_validation_error(e)}") from None
    if not settings.db.startswith("postgresql"):
        raise InputError(f"--db {mask_url(settings.db)}: the worker needs the shared PostgreSQL store (postgresql://...)")
    for flag, value, low in (("--concurrency", args.concurrency, 1), ("--max-attempts", args.max_attempts, 1),
                             ("--heartbeat-timeout", args.heartbeat_timeout, 1)):
        if value < low:
            raise InputError(f"{flag} must be >= {low} (got {value:g})")
    try:
        from .worker import Worker, WorkerConfig
    except ModuleNotFoundError as e:
        raise InputError(f"the worker needs the scaleout extra ({e.name} is missing): "
                         "pip install 'pipesched[scaleout]'") from None
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config = WorkerConfig(db=settings.db, table_prefix=settings.table_prefix, concurrency=args.concurrency,
                          max_attempts=args.max_attempts, heartbeat_timeout_s=args.heartbeat_timeout,
                          kill_grace_s=settings.kill_grace_s, nice=nice,
                          retention_s=settings.job_retention_s)
    asyncio.run(_run(Worker, config))
    return 0


async def _run(worker_cls: Any, config: Any) -> None:
    try:
        worker = worker_cls(config)
    except Exception as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise InputError(f"--db {mask_url(config.db)}: cannot open the store: {scrub(reason, config.db)}") from None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # finish the solves in hand, claim no more
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, worker.stop.set)
    print(f"pipesched: worker {worker.name} solving up to {config.concurrency} at once", flush=True)
    await worker.run()

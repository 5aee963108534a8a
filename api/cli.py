"""``pipesched serve`` and ``pipesched batch``."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from pipesched.solver.core.io import InputError

from .batch import ray as batch_ray  # noqa: F401  (registers --engine ray; imports ray only when used)
from .batch.engines import ENGINES
from .serve import port_number
from .settings import mask_url


def register(sub: Any) -> None:
    serve = sub.add_parser(
        "serve",
        help="run the schedule service (FastAPI + uvicorn)",
        description="Serve POST /v1/solve with a persistent cache. Settings also come from PIPESCHED_* "
        "environment variables (PIPESCHED_DB, PIPESCHED_TOKEN, PIPESCHED_MAX_OPS, ...); flags win.",
    )
    serve.add_argument("--host", default=None, help="interface to bind (default 127.0.0.1: loopback only)")
    serve.add_argument("--port", type=port_number, default=None,
                       help="TCP port (default 8000; 0: any free port, the one bound is printed)")
    serve.add_argument("--db", default=None, help="sqlite:///path (default ~/.local/share/pipesched/cache.db) "
                       "or postgresql://user@host/db")
    serve.add_argument("--token", default=None, help="bearer token required on POST (or PIPESCHED_TOKEN)")
    serve.add_argument("--workers", choices=("local", "external"), default=None,
                       help="local solver processes (default) or 'pipesched worker' processes through "
                       "the PostgreSQL queue (needs a postgresql:// --db)")
    serve.add_argument("--log-level", default="warning", help="uvicorn log level (default warning)")
    serve.set_defaults(handler=_serve)

    batch = sub.add_parser(
        "batch",
        help="solve many problems in parallel (resumable)",
        description="Solve a .jsonl file (one problem per line, or {\"name\": ..., \"problem\": ...}) or a folder "
        "of .json problems. Writes OUTDIR/<name>.json per problem and summary.csv / summary.md; problems "
        "already solved in OUTDIR are skipped; a bad problem is reported and skipped. An entry that is "
        "{\"model\": ..., \"cluster\": ...} is planned instead (docs/planning.md) and writes the plan.",
    )
    batch.add_argument("problems", help="a .jsonl file or a folder of .json files")
    batch.add_argument("-o", "--out", required=True, help="output folder")
    batch.add_argument("--jobs", type=int, default=1, help="parallel solves (default 1)")
    batch.add_argument("--server", default=None, help="solve through this service URL instead of locally")
    batch.add_argument("--token", default=None, help="bearer token for --server")
    batch.add_argument("--method", default="auto", help="method (default auto)")
    batch.add_argument("--time-limit", type=float, default=10.0, help="seconds per problem (default 10)")
    batch.add_argument("--force", action="store_true",
                       help="solve every problem again, even those already solved in OUTDIR")
    batch.add_argument("--engine", default="local", choices=sorted(ENGINES),
                       help="where each problem runs (default local: one solver process per problem; "
                       "ray: one Ray task per problem, needs pipesched[ray])")
    batch.add_argument("--address", default=None,
                       help="with --engine ray: the cluster (host:port, or auto); default RAY_ADDRESS or a local Ray")
    batch.set_defaults(handler=_batch)


def _serve(args: argparse.Namespace) -> int:
    from .serve import serve

    return serve(args, _check_external)


def _check_external(db: str) -> None:
    """--workers external needs the shared PostgreSQL store and the scaleout extra."""
    if not db.startswith("postgresql"):
        raise InputError(f"--workers external: needs a postgresql:// --db shared with the workers "
                         f"(got {mask_url(db)})")
    try:
        import pipesched.api.scaleout.front  # noqa: F401
    except ModuleNotFoundError as e:
        raise InputError(f"--workers external: {e.name} is missing: pip install 'pipesched[scaleout]'") from None


def _batch(args: argparse.Namespace) -> int:
    from .batch.run import run_batch

    if not Path(args.problems).exists():
        raise InputError(f"{args.problems}: no such file or folder")
    if args.jobs < 1:
        raise InputError(f"--jobs must be >= 1 (got {args.jobs})")
    if not args.time_limit > 0:
        raise InputError(f"--time-limit must be > 0 seconds (got {args.time_limit})")
    if args.address is not None:
        if args.engine != "ray":
            raise InputError(f"--address is for --engine ray (got --engine {args.engine})")
        os.environ["RAY_ADDRESS"] = args.address  # how ray.init finds the cluster
    return run_batch(args.problems, args.out, jobs=args.jobs, method=args.method, time_limit_s=args.time_limit,
                     server=args.server, token=args.token, engine=args.engine, force=args.force)

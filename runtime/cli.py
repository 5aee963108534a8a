"""``pipesched export``: a schedule or a plan for another runtime (torch-free, so the CLI needs no torch).

- ``--format torch-csv`` (a schedule, or a plan's schedule): torch's ``compute_only`` CSV, on stdout or
  in ``-o FILE``.
- ``--format torchtitan`` (a plan): writes the CSV and prints on stdout, as one line, the torchtitan
  flags that run it (:mod:`pipesched.solver.formats.torchtitan`); each thing torchtitan cannot express
  is one ``pipesched: warning:`` line on stderr. Without ``-o`` the CSV goes beside the plan
  (``PLAN.csv``); with ``-o DIR`` the CSV, a copy of the plan and a config module torchtitan loads
  (``--module pipesched_job --config job``) go in DIR.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from pipesched.solver.core.io import InputError, describe_validation_error, read_input
from pipesched.solver.core.schedule import Schedule
from pipesched.solver.formats.torch_csv import to_torch_csv
from pipesched.solver.formats.torchtitan import DEFAULT_BASE, config_module, torchtitan_job
from pipesched.solver.planning.exports import TORCHTITAN_VERSION
from pipesched.solver.planning.plan import Plan
from pipesched.solver.timing.validate import validate

FORMATS = ("torch-csv", "torchtitan")
#: File names ``--format torchtitan -o DIR`` writes.
CSV_FILE, PLAN_FILE, MODULE_FILE = "schedule.csv", "plan.json", "pipesched_job.py"


def _load(path: str) -> Plan | Schedule:
    """A plan (``pipesched plan -o``) or a schedule (``pipesched solve -o``), told apart by their fields."""
    data: Any = read_input(path, "plan or schedule")
    kind: type[BaseModel] = Plan if isinstance(data, dict) and "cluster" in data and "model" in data else Schedule
    try:
        return kind.model_validate(data)  # type: ignore[return-value]
    except ValidationError as e:
        raise InputError(f"{path}: invalid {kind.__name__.lower()}: {describe_validation_error(e)}") from None


def _checked_schedule(found: Plan | Schedule, path: str) -> Schedule:
    schedule = found.schedule if isinstance(found, Plan) else found
    if schedule is None or not schedule.ops:
        status = found.status
        raise InputError(f"{path}: {'plan' if isinstance(found, Plan) else 'schedule'} has status {status!r} "
                         "and no ops to export")
    errors = validate(schedule)
    if errors:
        raise InputError(f"{path}: invalid schedule: " + "; ".join(errors))
    return schedule


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror or e}") from None


def export(args: argparse.Namespace) -> int:
    found = _load(args.schedule)
    schedule = _checked_schedule(found, args.schedule)
    if args.format == "torchtitan":
        return _export_torchtitan(found, args)
    text = to_torch_csv(schedule)
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        _write(Path(args.output), text)
        print(f"wrote {args.output} ({schedule.problem.devices} ranks, {len(schedule.ops)} actions)", file=sys.stderr)
    return 0


def _export_torchtitan(found: Plan | Schedule, args: argparse.Namespace) -> int:
    if not isinstance(found, Plan):
        raise InputError(f"{args.schedule}: --format torchtitan needs a plan (pipesched plan -o PLAN.json): "
                         "a schedule has no layer split or module names")
    job = torchtitan_job(found)
    written: list[Path] = []
    if args.output in (None, "-"):
        if args.schedule == "-":
            raise InputError("a plan read from stdin needs -o DIR for its CSV")
        csv = Path(args.schedule).with_suffix(".csv")
    else:
        folder = Path(args.output)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"cannot create {folder}: {e.strerror or e}") from None
        csv = folder / CSV_FILE
        module = config_module(args.base, PLAN_FILE, CSV_FILE, Path(MODULE_FILE).stem)
        for name, text in ((PLAN_FILE, found.model_dump_json() + "\n"), (MODULE_FILE, module)):
            _write(folder / name, text)
            written.append(folder / name)
    _write(csv, job.csv)
    for warning in job.warnings:
        print(f"pipesched: warning: {warning}", file=sys.stderr)
    print(shlex.join(job.flags(str(csv.resolve()))))
    print(f"wrote {', '.join(str(p) for p in [csv, *written])} (torchtitan {TORCHTITAN_VERSION}: "
          f"{job.degree} ranks, schedule class {job.schedule_class}, {job.microbatches} microbatches)", file=sys.stderr)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "export",
        help="export a schedule or a plan for another runtime (torch.distributed.pipelining CSV, torchtitan)",
        description="torch-csv: SCHEDULE.json (or a plan's schedule) as torch's compute_only CSV, loadable by "
        "_PipelineScheduleRuntime._load_csv. torchtitan: PLAN.json as the CSV plus the torchtitan "
        f"{TORCHTITAN_VERSION} flags that run it (printed); -o DIR also writes the plan and a config module.",
    )
    p.add_argument("schedule", metavar="SCHEDULE_OR_PLAN.json")
    p.add_argument("--format", choices=FORMATS, default="torch-csv")
    p.add_argument("-o", "--output", metavar="FILE_OR_DIR",
                   help="torch-csv: output file (default stdout); torchtitan: a folder for the CSV, the plan and "
                   f"{MODULE_FILE} (default: the CSV beside the plan)")
    p.add_argument("--base", default=DEFAULT_BASE, metavar="MODULE:FUNCTION",
                   help="torchtitan -o: the torchtitan config function the written module starts from "
                   f"(default {DEFAULT_BASE})")
    p.set_defaults(handler=export)

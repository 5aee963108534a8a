"""``pipesched export``: a schedule file to another format (torch-free, so the CLI needs no torch)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipesched.solver.core.io import InputError, load_schedule
from pipesched.solver.formats.torch_csv import to_torch_csv
from pipesched.solver.timing.validate import validate

#: Export formats and the function producing each one's text.
FORMATS = {"torch-csv": to_torch_csv}


def export(args: argparse.Namespace) -> int:
    schedule = load_schedule(args.schedule)
    if not schedule.ops:
        raise InputError(f"{args.schedule}: schedule has status {schedule.status!r} and no ops to export")
    errors = validate(schedule)
    if errors:
        raise InputError(f"{args.schedule}: invalid schedule: " + "; ".join(errors))
    text = FORMATS[args.format](schedule)
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        try:
            Path(args.output).write_text(text)
        except OSError as e:
            raise InputError(f"cannot write {args.output}: {e.strerror or e}") from None
        print(f"wrote {args.output} ({schedule.problem.devices} ranks, {len(schedule.ops)} actions)", file=sys.stderr)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "export",
        help="export a schedule for another runtime (torch.distributed.pipelining CSV)",
        description="Write SCHEDULE.json as torch's compute_only CSV, loadable by "
        "_PipelineScheduleRuntime._load_csv (torchtitan: pipeline_parallel_schedule_csv).",
    )
    p.add_argument("schedule", metavar="SCHEDULE.json")
    p.add_argument("--format", choices=sorted(FORMATS), default="torch-csv")
    p.add_argument("-o", "--output", metavar="FILE", help="output file (default: stdout)")
    p.set_defaults(handler=export)

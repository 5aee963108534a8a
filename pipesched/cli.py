"""The ``pipesched`` command: each area contributes its sub-commands through ``register``.

``pipesched.solver.cli`` adds solve, validate, render and methods; ``pipesched.solver.costmodel.cli``
adds model; ``pipesched.api.cli`` adds serve and batch; ``pipesched.runtime.cli`` adds export
(torch-free at import). Any expected error becomes one readable line on stderr and a non-zero
exit, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from pydantic import ValidationError

from pipesched import __version__
from pipesched.solver.core.errors import NotApplicableError
from pipesched.solver.core.io import InputError, describe_validation_error
from pipesched.solver.isolated import SolverCrashed

_COMMAND_MODULES = ("pipesched.solver.cli", "pipesched.solver.costmodel.cli", "pipesched.api.cli",
                    "pipesched.api.scaleout.cli", "pipesched.runtime.cli")

#: Exit code for bad input (file, JSON, field) or a method that does not apply.
EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors as one line (``pipesched: error: solve: ...``) and exit 2, like
    every other bad input; ``--help`` still shows the usage."""

    def error(self, message: str) -> NoReturn:
        where = self.prog.removeprefix("pipesched").strip()
        print(f"pipesched: error: {where + ': ' if where else ''}{message} (see {self.prog} --help)",
              file=sys.stderr)
        sys.exit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pipesched",
        description="Solve, check, render, serve and export pipeline-parallel training schedules.",
    )
    parser.add_argument("--version", action="version", version=f"pipesched {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name != name:  # a real missing dependency inside the module: surface it
                raise
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except (InputError, NotApplicableError) as e:
        print(f"pipesched: error: {e}", file=sys.stderr)
    except ValidationError as e:
        print(f"pipesched: error: {describe_validation_error(e)}", file=sys.stderr)
    except KeyboardInterrupt:
        print("pipesched: interrupted", file=sys.stderr)
        return 130
    except SolverCrashed as e:
        print(f"pipesched: error: {e}", file=sys.stderr)
        return 1
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())

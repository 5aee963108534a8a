"""The common tail of every benchmark script: how it was called, and where its table goes."""

from __future__ import annotations

import sys
from pathlib import Path


def command_line(script: str, argv: list[str] | None) -> str:
    """The command that re-runs a benchmark as it was called (quoted in its results file)."""
    args = argv if argv is not None else sys.argv[1:]
    return f"python benchmarks/{script}" + "".join(f" {a}" for a in args)


def publish(text: str, out: Path) -> None:
    """Print the markdown table and write it to ``out`` (the results file the README links to)."""
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)

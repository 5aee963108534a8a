"""Reading a sweep and writing its results: problems in, one file per schedule, a summary out.

Kept apart from the driver (:mod:`pipesched.api.batch`) so the engines and the driver share one
notion of an item, a result row and an atomic write.
"""

from __future__ import annotations

import csv
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from pipesched.solver.core.io import InputError, describe_validation_error, parse_json
from pipesched.solver.core.problem import Problem
from pipesched.solver.core.schedule import Schedule

SUMMARY_FIELDS = ("name", "status", "method", "makespan", "objective", "lower_bound", "gap", "bubble", "time_s", "error")


@dataclass
class Item:
    name: str
    problem: Problem | None = None
    error: str | None = None


@dataclass
class Row:
    name: str
    schedule: Schedule | None = None
    error: str | None = None
    time_s: float = 0.0
    interrupted: bool = False  # stopped by Ctrl-C / SIGTERM before it finished: not a failure

    def cells(self) -> dict[str, str]:
        s = self.schedule

        def num(x: float | None) -> str:
            return "" if x is None else f"{x:.6g}"

        return {
            "name": self.name,
            "status": s.status if s else ("not run" if self.interrupted else "error"),
            "method": s.method if s else "",
            "makespan": num(s.makespan if s else None),
            "objective": num(s.objective_value if s else None),
            "lower_bound": num(s.lower_bound if s else None),
            "gap": num(s.gap if s else None),
            "bubble": num(s.bubble_ratio if s else None),
            "time_s": f"{self.time_s:.3f}",
            "error": self.error or (s.reason or "" if s else ("interrupted" if self.interrupted else "")),
        }


def read_items(source: str | Path) -> list[Item]:
    """Problems from a folder of ``.json`` files or a ``.jsonl`` file; unreadable ones carry their error."""
    src = Path(source)
    raw: list[tuple[str, Any, str | None]] = []
    if src.is_dir():
        for path in sorted(src.glob("*.json")):
            try:
                raw.append((path.stem, parse_json(path.read_bytes(), path.name), None))
            except OSError as e:
                raw.append((path.stem, None, f"{path.name}: cannot read ({e.strerror or e})"))
            except InputError as e:
                raw.append((path.stem, None, str(e)))
    elif src.is_file():
        for n, line in enumerate(src.read_bytes().splitlines(), start=1):
            if not line.strip():
                continue
            name = f"{src.stem}-{n:05d}"
            try:
                data = parse_json(line, f"line {n}")
            except InputError as e:
                raw.append((name, None, str(e)))
                continue
            if isinstance(data, dict) and "problem" in data and isinstance(data.get("name"), str):
                name, data = data["name"], data["problem"]
            raw.append((name, data, None))
    else:
        raise FileNotFoundError(f"{src}: no such file or folder")
    items, seen = [], set()
    for name, data, error in raw:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "problem"
        while safe in seen:
            safe += "_"
        seen.add(safe)
        if error is not None:
            items.append(Item(safe, error=error))
            continue
        try:
            items.append(Item(safe, problem=Problem.model_validate(data)))
        except ValidationError as e:
            items.append(Item(safe, error=f"invalid problem: {describe_validation_error(e)}"))
    return items


def write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Progress:
    """A one-line progress bar with rate and ETA on a terminal; a line per ~10% otherwise."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total, self.done, self.stream = total, 0, stream
        self.t0 = time.monotonic()
        self.tty = stream.isatty()
        self._last_decile = -1

    def step(self) -> None:
        self.done += 1
        elapsed = time.monotonic() - self.t0
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else 0.0
        filled = int(30 * self.done / max(1, self.total))
        line = (f"[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} "
                f"{rate:.1f}/s ETA {int(eta) // 60}:{int(eta) % 60:02d}")
        if self.tty:
            self.stream.write("\r" + line + ("\n" if self.done == self.total else ""))
        elif self.done * 10 // max(1, self.total) != self._last_decile or self.done == self.total:
            self._last_decile = self.done * 10 // max(1, self.total)
            self.stream.write(line + "\n")
        self.stream.flush()


def write_summary(out: Path, rows: list[Row]) -> None:
    cells = [r.cells() for r in rows]
    with open(out / "summary.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=SUMMARY_FIELDS)
        writer.writeheader()
        writer.writerows(cells)
    lines = ["| " + " | ".join(SUMMARY_FIELDS) + " |", "|" + "---|" * len(SUMMARY_FIELDS)]
    for c in cells:
        lines.append("| " + " | ".join(c[k].replace("|", "\\|") for k in SUMMARY_FIELDS) + " |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")

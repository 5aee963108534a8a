"""Reading a sweep and writing its results: problems in, one file per schedule, a summary out.

Kept apart from the driver (:mod:`pipesched.api.batch.run`) so the engines and the driver share one
notion of an item, a result row and an atomic write.
"""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from pipesched.solver.core.io import InputError, describe_validation_error, parse_json
from pipesched.solver.core.problem import Problem
from pipesched.solver.core.schedule import Schedule
from pipesched.solver.planning.plan import Plan

from ..models import PlanRequest

#: Fields of a plan request that a sweep sets for every item instead.
_SWEEP_FLAGS = ("method", "time_limit_s", "wait_s")
SUMMARY_FIELDS = ("name", "status", "method", "makespan", "objective", "lower_bound", "gap", "bubble", "time_s", "error")


@dataclass
class Item:
    """One problem to solve, or one model + cluster to plan (``{"model": ..., "cluster": ...}``)."""

    name: str
    problem: Problem | None = None
    error: str | None = None
    plan: PlanRequest | None = None


@dataclass
class Row:
    name: str
    schedule: Schedule | None = None
    error: str | None = None
    time_s: float = 0.0
    interrupted: bool = False  # stopped by Ctrl-C / SIGTERM before it finished: not a failure
    plan: Plan | None = None  # a plan item's answer (its schedule is ``plan.schedule``)
    key: str = ""  # a plan item's cache key (a schedule's is its problem's)

    def cells(self) -> dict[str, str]:
        if self.plan is not None:
            return self._plan_cells(self.plan)
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

    def _plan_cells(self, p: Plan) -> dict[str, str]:
        """A plan's row: its step time is the makespan and objective, its bound is over every split."""
        s = p.schedule
        num = (lambda x: "" if x is None else f"{x:.6g}")  # noqa: E731
        return {"name": self.name, "status": p.status, "method": f"plan {p.method}", "makespan": num(p.step_time),
                "objective": num(p.step_time), "lower_bound": num(p.lower_bound), "gap": num(p.gap),
                "bubble": num(s.bubble_ratio if s else None), "time_s": f"{self.time_s:.3f}",
                "error": self.error or p.reason or ""}


def read_items(source: str | Path) -> list[Item]:
    """Problems from a folder of ``.json`` files or a ``.jsonl`` file; unreadable ones carry their error.

    An entry with a ``model`` is a plan request (``{"model", "cluster"}``, optionally ``module_names``;
    the method and time limit are the sweep's); a ``.jsonl`` line may name either kind with ``name``."""
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
            if isinstance(data, dict) and isinstance(data.get("name"), str) and ("problem" in data or "model" in data):
                name, data = data["name"], data["problem"] if "problem" in data else _without_name(data)
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
        planning = isinstance(data, dict) and "model" in data
        flags = [k for k in _SWEEP_FLAGS if planning and k in data]
        if flags:
            items.append(Item(safe, error=f"{', '.join(flags)}: a plan request in a sweep takes the method and "
                                          "time limit from the command line (--method, --time-limit)"))
            continue
        try:
            if planning:
                items.append(Item(safe, plan=PlanRequest.model_validate(data)))
            else:
                items.append(Item(safe, problem=Problem.model_validate(data)))
        except ValidationError as e:
            what = "plan request (model + cluster)" if planning else "problem"
            items.append(Item(safe, error=f"invalid {what}: {describe_validation_error(e)}"))
    return items


def _without_name(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != "name"}


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

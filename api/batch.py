"""``pipesched batch``: solve a sweep of problems in parallel, resumably, into one folder.

Locally every problem runs in its own killable process (the service's
:class:`~pipesched.api.solving.runner.ProcessRunner`), so a solver that hangs on one problem costs that
problem, not the sweep; with ``--server`` the problems go through the service's cache instead.
A schedule already in OUTDIR for the same canonical problem is not solved again, and a bad
problem is reported and skipped. The exit code is 1 when any problem failed, else 0.
"""

from __future__ import annotations

import csv
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from pipesched.solver.core.canonical import problem_key
from pipesched.solver.core.io import describe_validation_error
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

    def cells(self) -> dict[str, str]:
        s = self.schedule

        def num(x: float | None) -> str:
            return "" if x is None else f"{x:.6g}"

        return {
            "name": self.name,
            "status": s.status if s else "error",
            "method": s.method if s else "",
            "makespan": num(s.makespan if s else None),
            "objective": num(s.objective_value if s else None),
            "lower_bound": num(s.lower_bound if s else None),
            "gap": num(s.gap if s else None),
            "bubble": num(s.bubble_ratio if s else None),
            "time_s": f"{self.time_s:.3f}",
            "error": self.error or (s.reason or "" if s else ""),
        }


def read_items(source: str | Path) -> list[Item]:
    """Problems from a folder of ``.json`` files or a ``.jsonl`` file; unreadable ones carry their error."""
    src = Path(source)
    raw: list[tuple[str, Any, str | None]] = []
    if src.is_dir():
        for path in sorted(src.glob("*.json")):
            try:
                raw.append((path.stem, json.loads(path.read_text()), None))
            except (OSError, ValueError) as e:
                raw.append((path.stem, None, f"{path.name}: not valid JSON ({e})"))
    elif src.is_file():
        for n, line in enumerate(src.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            name = f"{src.stem}-{n:05d}"
            try:
                data = json.loads(line)
            except ValueError as e:
                raw.append((name, None, f"line {n}: not valid JSON ({e})"))
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


def already_solved(out: Path, item: Item) -> Schedule | None:
    """The schedule in OUTDIR for this item, if it answers the same canonical problem."""
    path = out / f"{item.name}.json"
    if item.problem is None or not path.exists():
        return None
    try:
        schedule = Schedule.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return None  # a damaged file is solved again
    return schedule if problem_key(schedule.problem) == problem_key(item.problem) else None


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


def _solver(server: str | None, token: str | None, method: str, time_limit_s: float):  # noqa: ANN202
    """A function ``problem -> (schedule JSON, error)`` solving locally or through the service."""
    if server:
        from pipesched.client import Client, ServiceError

        client = Client(server, token=token, cache_dir=False, timeout=time_limit_s + 60)

        def remote(problem: Problem) -> tuple[str | None, str | None]:
            try:
                return client.solve(problem, method, time_limit_s).model_dump_json(), None
            except ServiceError as e:
                return None, str(e)

        return remote

    from .solving.runner import ProcessRunner

    runner = ProcessRunner(kill_grace_s=max(5.0, time_limit_s))

    def local(problem: Problem) -> tuple[str | None, str | None]:
        outcome, payload = runner.run(problem.model_dump_json(), method, time_limit_s, None)
        return (payload, None) if outcome == "ok" else (None, payload)

    return local


def run_batch(problems: str | Path, out: str | Path, *, jobs: int = 1, method: str = "auto",
              time_limit_s: float = 10.0, server: str | None = None, token: str | None = None,
              stream: TextIO | None = None) -> int:
    stream = stream or sys.stderr
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    items = read_items(problems)
    rows: dict[str, Row] = {}
    todo: list[Item] = []
    for item in items:
        if item.error is not None:
            rows[item.name] = Row(item.name, error=item.error)
            print(f"pipesched: skipping {item.name}: {item.error}", file=stream)
        elif (done := already_solved(out, item)) is not None:
            rows[item.name] = Row(item.name, schedule=done, time_s=done.solve_time_s)
        else:
            todo.append(item)
    skipped = len(items) - len(todo) - sum(1 for r in rows.values() if r.error)
    print(f"pipesched: {len(todo)} to solve, {skipped} already in {out}, "
          f"{sum(1 for r in rows.values() if r.error)} unreadable", file=stream)
    solve = _solver(server, token, method, time_limit_s)
    progress = Progress(len(todo), stream)

    def one(item: Item) -> Row:
        assert item.problem is not None
        t0 = time.perf_counter()
        schedule_json, error = solve(item.problem)
        elapsed = time.perf_counter() - t0
        if error is not None or schedule_json is None:
            return Row(item.name, error=error, time_s=elapsed)
        schedule = Schedule.model_validate_json(schedule_json)
        write_atomic(out / f"{item.name}.json", schedule.model_dump_json() + "\n")
        return Row(item.name, schedule=schedule, time_s=elapsed)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(one, item) for item in todo]
        for future in as_completed(futures):
            row = future.result()
            rows[row.name] = row
            if row.error:
                stream.write(f"\npipesched: {row.name} failed: {row.error}\n" if progress.tty
                             else f"pipesched: {row.name} failed: {row.error}\n")
            progress.step()
    ordered = [rows[i.name] for i in items]
    write_summary(out, ordered)
    failed = [r.name for r in ordered if r.error]
    print(f"pipesched: {len(ordered) - len(failed)} solved, {len(failed)} failed; summary in "
          f"{out / 'summary.md'}", file=stream)
    return 1 if failed else 0


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

"""``pipesched batch``: solve a sweep of problems in parallel, resumably, into one folder.

Each problem runs on an engine (:mod:`pipesched.api.batch.engines`: locally one killable process
per problem, so a solver that hangs costs that problem, not the sweep; or the service's cache with
``--server``). The driver here reads the sweep, decides what is already done, feeds the engine
from ``jobs`` threads and writes each schedule as it arrives.

Resume follows the service's cache rule: finished work is keyed by (canonical problem, method)
and recorded in ``OUTDIR/solved.jsonl`` with the time limit it was given; it is reused when final
(``optimal``, ``infeasible``) or given at least the time asked for now, else solved again,
warm-started from it. ``force`` solves everything again.

Ctrl-C / SIGTERM: the engine kills its solves, finished schedules stay, the summary lists what
is done and what was not run, and the exit code is 130. Otherwise 1 when any problem failed.
"""

from __future__ import annotations

import json
import queue
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from pipesched.solver.core.canonical import problem_key
from pipesched.solver.core.io import InputError, write_atomic
from pipesched.solver.core.schedule import Schedule
from pipesched.solver.planning.key import plan_key
from pipesched.solver.planning.plan import Plan

from .engines import Answer, Engine, EngineConfig, StopBatch, make_engine
from .io import Item, Progress, Row, read_items, write_summary
from .plans import PlanEngine, make_plan_engine

#: One JSON line per finished solve: name, key, method, time_limit_s (what resume compares).
SOLVED_LOG = "solved.jsonl"
FINAL_STATUSES = ("optimal", "infeasible")
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class Previous:
    """A schedule already in OUTDIR and whether it answers this run as is."""

    schedule: Schedule
    enough: bool


def solved_log(out: Path) -> dict[str, dict[str, Any]]:
    """The last record per name in ``OUTDIR/solved.jsonl`` (a torn last line is ignored)."""
    records: dict[str, dict[str, Any]] = {}
    try:
        lines = (out / SOLVED_LOG).read_text().splitlines()
    except OSError:
        return records
    for line in lines:
        try:
            record = json.loads(line)
            records[record["name"]] = record
        except (ValueError, KeyError, TypeError):
            continue
    return records


def previous(out: Path, item: Item, record: dict[str, Any] | None, method: str, time_limit_s: float) -> Previous | None:
    """The schedule in OUTDIR for (this problem, this method), if there is one."""
    path = out / f"{item.name}.json"
    if item.problem is None or record is None or not path.exists():
        return None
    key = problem_key(item.problem)
    if record.get("key") != key or record.get("method") != method:
        return None
    try:
        schedule = Schedule.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return None  # a damaged file is solved again
    if problem_key(schedule.problem) != key:
        return None
    budget = float(record.get("time_limit_s", 0.0))
    return Previous(schedule, schedule.status in FINAL_STATUSES or budget >= time_limit_s)


def item_key(item: Item) -> str:
    """The cache key of an item: its problem's, or its plan request's."""
    if item.plan is not None:
        return plan_key(item.plan.model, item.plan.cluster, item.plan.module_names)
    assert item.problem is not None
    return problem_key(item.problem)


def previous_plan(out: Path, item: Item, record: dict[str, Any] | None, method: str, time_limit_s: float) -> Plan | None:
    """The plan in OUTDIR for (this request, this method) when it answers this run as is."""
    path = out / f"{item.name}.json"
    if item.plan is None or record is None or not path.exists():
        return None
    if record.get("key") != item_key(item) or record.get("method") != method:
        return None
    try:
        found = Plan.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return None  # a damaged file is planned again
    if plan_key(found.model, found.cluster, item.plan.module_names) != record["key"]:
        return None
    final = found.status in FINAL_STATUSES or float(record.get("time_limit_s", 0.0)) >= time_limit_s
    return found if final else None


@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGINT and SIGTERM set ``stop`` instead of raising where they land (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def run_batch(problems: str | Path, out: str | Path, *, jobs: int = 1, method: str = "auto",
              time_limit_s: float = 10.0, server: str | None = None, token: str | None = None,
              engine: str = "local", force: bool = False, stream: TextIO | None = None) -> int:
    stream = stream or sys.stderr
    out = Path(out)
    items = read_items(problems)
    config = EngineConfig(method=method, time_limit_s=time_limit_s, server=server, token=token, jobs=jobs)
    try:
        runner = make_engine(engine, config)
    except StopBatch as e:
        raise InputError(str(e)) from None
    has_plans = any(i.plan is not None for i in items) and runner.stream is None  # a stream plans itself
    plans = make_plan_engine(engine, config) if has_plans else None
    out.mkdir(parents=True, exist_ok=True)
    log = {} if force else solved_log(out)
    rows: dict[str, Row] = {}
    todo: list[tuple[Item, Schedule | None]] = []
    for item in items:
        if item.error is not None:
            rows[item.name] = Row(item.name, error=item.error)
            print(f"pipesched: skipping {item.name}: {item.error}", file=stream)
            continue
        if item.plan is not None:
            done = previous_plan(out, item, log.get(item.name), method, time_limit_s)
            if done is not None:
                rows[item.name] = Row(item.name, plan=done, time_s=done.solve_time_s)
            else:
                todo.append((item, None))
            continue
        prev = previous(out, item, log.get(item.name), method, time_limit_s)
        if prev is not None and prev.enough:
            rows[item.name] = Row(item.name, schedule=prev.schedule, time_s=prev.schedule.solve_time_s)
        else:
            todo.append((item, prev.schedule if prev else None))
    unreadable = sum(1 for r in rows.values() if r.error)
    again = sum(1 for _, hint in todo if hint is not None)
    print(f"pipesched: {len(todo)} to solve, {len(rows) - unreadable} already in {out}, {unreadable} unreadable"
          + (f"; {again} of those again, with a larger time limit" if again else ""), file=stream)
    stop = threading.Event()
    with stop_on_signals(stop):
        fatal = _run(todo, runner, config, out, rows, stop, Progress(len(todo), stream), stream, plans)
    interrupted = stop.is_set() and fatal is None
    ordered = [rows.get(i.name) or Row(i.name, interrupted=True) for i in items]
    write_summary(out, ordered)
    failed = [r.name for r in ordered if r.error]
    not_run = sum(1 for r in ordered if r.interrupted)
    done = len(ordered) - len(failed) - not_run
    if fatal is not None:
        raise InputError(f"{fatal} (stopped at the first problem; {done} done, summary in {out / 'summary.md'})")
    if interrupted:
        print(f"pipesched: interrupted: {done} done, {len(failed)} failed, {not_run} not run; "
              f"summary in {out / 'summary.md'}", file=stream)
        return EXIT_INTERRUPTED
    print(f"pipesched: {done} solved, {len(failed)} failed; summary in {out / 'summary.md'}", file=stream)
    return 1 if failed else 0


def _run(todo: list[tuple[Item, Schedule | None]], engine: Engine, config: EngineConfig, out: Path,
         rows: dict[str, Row], stop: threading.Event, progress: Progress, stream: TextIO,
         plans: PlanEngine | None = None) -> str | None:
    """Feed ``todo`` to the engine from daemon threads (so a stuck solve never holds up the exit);
    return the message of an error that stops the sweep, if one happened."""
    pending: queue.SimpleQueue[tuple[Item, Schedule | None]] = queue.SimpleQueue()
    for entry in todo:
        pending.put(entry)
    results: queue.SimpleQueue[Row | StopBatch] = queue.SimpleQueue()
    started = 0  # items taken by a worker; once stopping, only those can still answer
    lock = threading.Lock()

    def work() -> None:
        nonlocal started
        while not stop.is_set():
            with lock:
                if stop.is_set():
                    return
                try:
                    item, hint = pending.get_nowait()
                except queue.Empty:
                    return
                started += 1
            results.put(_one(item, hint, engine, stop) if item.plan is None else _one_plan(item, plans, stop))

    def from_stream() -> None:
        """A streaming engine is handed every item at once and answers them as they arrive."""
        assert engine.stream is not None
        items = [item.plan if item.plan is not None else (item.problem, hint) for item, hint in todo]
        try:
            for index, answer, elapsed in engine.stream(items, stop):  # type: ignore[arg-type]
                results.put(_row(todo[index][0], answer, elapsed, stop))
        except StopBatch as e:
            results.put(e)
        except Exception as e:  # the engine itself broke (e.g. the cluster went away): stop, do not hang
            results.put(StopBatch(f"the batch engine failed: {type(e).__name__}: {e}"))

    if engine.stream is not None and todo:
        started = len(todo)
        threading.Thread(target=from_stream, daemon=True, name="pipesched-batch").start()
    width = max(1, min(engine.slots or config.jobs, len(todo)))
    for _ in range(width if todo and engine.stream is None else 0):
        threading.Thread(target=work, daemon=True, name="pipesched-batch").start()
    received, fatal = 0, None
    deadline: float | None = None  # once stopping: how long to wait for solves being killed
    while received < len(todo):
        if stop.is_set() and deadline is None:
            engine.stop()
            if plans is not None:
                plans.stop()
            deadline = time.monotonic() + 1.0
        if deadline is not None and (time.monotonic() > deadline or received >= started):
            break
        try:
            got = results.get(timeout=0.1)
        except queue.Empty:
            continue
        received += 1
        if isinstance(got, StopBatch):
            fatal = fatal or str(got)
            stop.set()
            continue
        if got.interrupted:
            continue
        rows[got.name] = got
        answer = got.plan or got.schedule
        if answer is not None:
            write_atomic(out / f"{got.name}.json", answer.model_dump_json() + "\n")
            key = problem_key(got.schedule.problem) if got.plan is None and got.schedule else got.key
            with open(out / SOLVED_LOG, "a") as f:
                f.write(json.dumps({"name": got.name, "key": key,
                                    "method": config.method, "time_limit_s": config.time_limit_s}) + "\n")
        elif got.error:
            stream.write(f"{chr(10) if progress.tty else ''}pipesched: {got.name} failed: {got.error}\n")
        progress.step()
    return fatal


def _one(item: Item, hint: Schedule | None, engine: Engine, stop: threading.Event) -> Row | StopBatch:
    assert item.problem is not None
    t0 = time.perf_counter()
    try:
        answer = engine.solve(item.problem, hint)
    except StopBatch as e:
        return e
    return _row(item, answer, time.perf_counter() - t0, stop)


def _one_plan(item: Item, plans: PlanEngine | None, stop: threading.Event) -> Row | StopBatch:
    assert item.plan is not None and plans is not None
    t0 = time.perf_counter()
    try:
        answer = plans.plan(item.plan)
    except StopBatch as e:
        return e
    return _row(item, answer, time.perf_counter() - t0, stop)


def _row(item: Item, answer: Answer, elapsed: float, stop: threading.Event) -> Row:
    """An engine's answer (a schedule, or a plan for a plan item) as the item's summary row."""
    found_json, error = answer
    if found_json is None:
        return Row(item.name, error=error, time_s=elapsed, interrupted=stop.is_set())
    if item.plan is None:
        return Row(item.name, schedule=Schedule.model_validate_json(found_json), time_s=elapsed)
    found = Plan.model_validate_json(found_json)
    return Row(item.name, schedule=found.schedule, plan=found, time_s=elapsed, key=item_key(item))

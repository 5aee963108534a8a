"""Reading problems and schedules from files, with errors a person can act on."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ValidationError

from .problem import Problem
from .schedule import Schedule


class InputError(ValueError):
    """Bad user input: the message is one readable line naming the file and field."""


def describe_validation_error(error: ValidationError) -> str:
    """Collapse a pydantic error into one line: ``field: reason; field: reason``."""
    parts = []
    for e in error.errors():
        where = ".".join(str(x) for x in e["loc"]) or "problem"
        msg = e["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {msg}" if e["loc"] else msg)
    return "; ".join(parts)


def _load(path: str | Path, model: type[BaseModel], what: str) -> BaseModel:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise InputError(f"cannot read {what} file {p}: {e.strerror or e}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{p}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise InputError(f"{p}: invalid {what}: {describe_validation_error(e)}") from None


def load_problem(path: str | Path) -> Problem:
    """A problem from a JSON file; a schedule file is accepted too (its ``problem`` is used)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        data = None
    if isinstance(data, dict) and "problem" in data and "ops" in data:
        return load_schedule(p).problem
    return _load(p, Problem, "problem")  # type: ignore[return-value]


def load_schedule(path: str | Path) -> Schedule:
    return _load(path, Schedule, "schedule")  # type: ignore[return-value]


def dump_json(model: BaseModel) -> str:
    """The canonical JSON text of a problem or schedule (what the CLI writes and the service serves)."""
    return model.model_dump_json(indent=None) + "\n"

"""Reading problems and schedules from files, with errors a person can act on; writing files whole."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

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


def parse_json(data: str | bytes, where: str) -> Any:
    """JSON from text or bytes, or an :class:`InputError` naming ``where`` and the reason.

    Bytes must be UTF-8 (RFC 8259). Nesting deep enough to exhaust the parser's recursion limit
    (thousands of ``[``; a problem needs 3 levels) is refused the same way.
    """
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"{where}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})") from None
    try:
        return json.loads(data)
    except json.JSONDecodeError as e:
        raise InputError(f"{where}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply to read") from None


def read_input(path: str | Path, what: str) -> Any:
    """Parsed JSON of a file, or of stdin when ``path`` is ``-``."""
    if str(path) == "-":
        return parse_json(sys.stdin.buffer.read(), "stdin")
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read {what} file {p}: {e.strerror or e}") from None
    return parse_json(raw, str(p))


_UNREAD = object()


def _load(path: str | Path, model: type[BaseModel], what: str, data: Any = _UNREAD) -> BaseModel:
    where = "stdin" if str(path) == "-" else str(Path(path))
    if data is _UNREAD:
        data = read_input(path, what)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise InputError(f"{where}: invalid {what}: {describe_validation_error(e)}") from None


def load_problem(path: str | Path) -> Problem:
    """A problem from a JSON file (``-``: stdin); a schedule file is accepted too (its ``problem`` is used)."""
    data = read_input(path, "problem")
    if isinstance(data, dict) and "problem" in data and "ops" in data:
        return _load(path, Schedule, "schedule", data).problem  # type: ignore[attr-defined]
    return _load(path, Problem, "problem", data)  # type: ignore[return-value]


def load_schedule(path: str | Path) -> Schedule:
    return _load(path, Schedule, "schedule")  # type: ignore[return-value]


def dump_json(model: BaseModel) -> str:
    """The canonical JSON text of a problem or schedule (what the CLI writes and the service serves)."""
    return model.model_dump_json(indent=None) + "\n"


def write_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: a reader (or a process writing
    the same file at the same time) sees the old file or the new one, never a part."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

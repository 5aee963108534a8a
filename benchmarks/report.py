"""The common tail of every benchmark script: how it was called, what it ran on, where its table goes.

A figure means little without the code and the machine that made it: this project's machine has
2 cores shared with other jobs, so the load average around a run matters as much as the commit.
``publish`` therefore begins every results file with a header (``commit: <sha>`` as the tree was when
the script started, then the load average before and after, cores, CPU model, memory, Python and the
versions of the packages that do the work) and writes a JSON file beside it: the same header fields, the command, the figures the
script names (``figures=``, and those ``benchmarks/figures.py`` reads from the page: what the README
quotes, ``tests/test_readme_figures.py`` checks each against its field) and every table of the page, row by row. "Before" is the load when
this module was imported, which every script does first.

    python benchmarks/report.py --migrate benchmarks/results/X.md ...   # an older file: header + JSON
    python benchmarks/report.py --refigure benchmarks/results/X.md ...  # its figures from its page
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

#: Heading of the section results files made before the header ended with (``--migrate`` reads it).
PROVENANCE_HEADING = "## Provenance"
#: The header's fields, in order; the first line of every results file is ``commit: <sha>``.
HEADER_FIELDS = ("commit", "load average (1 / 5 / 15 min)", "machine", "software")
#: Paths whose uncommitted changes do not change what a benchmark measures (results, prose, tests).
NOT_CODE = ("benchmarks/results/", "docs/", "README.md", "tests/")

#: The packages whose versions change what a benchmark measures.
KEY_PACKAGES = ("ortools", "pulp", "highspy", "fastapi", "starlette", "uvicorn", "pydantic",
                "sqlalchemy", "httpx", "torch", "numpy")

_REPO = Path(__file__).resolve().parent.parent
_LOAD_AT_IMPORT = os.getloadavg()
_COMMIT_AT_IMPORT: str | None = None  # set below, once commit() is defined: the code the run starts with


def command_line(script: str, argv: list[str] | None) -> str:
    """The command that re-runs a benchmark as it was called (quoted in its results file)."""
    args = argv if argv is not None else sys.argv[1:]
    return f"python benchmarks/{script}" + "".join(f" {a}" for a in args)


def _git(*args: str) -> str:
    result = subprocess.run(["git", *args], cwd=_REPO, capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def commit() -> str:
    """``git rev-parse --short HEAD``, plus which tracked code files differ from it when the tree is
    dirty (the figures then come from code no commit holds); results files and prose do not count."""
    try:
        head = _git("rev-parse", "--short", "HEAD").strip()
        changed = [line[3:] for line in _git("status", "--porcelain", "--untracked-files=no").splitlines()]
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as e:
        return f"unknown ({e})"
    changed = [f for f in changed if not f.startswith(NOT_CODE)]
    if not changed:
        return head
    shown = ", ".join(changed[:6]) + (", ..." if len(changed) > 6 else "")
    return f"{head} dirty (tracked files changed: {len(changed)}: {shown})"


_COMMIT_AT_IMPORT = commit()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    return "unknown memory"


def machine() -> str:
    """Cores (and how many this process may use), CPU model, memory, OS."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (f"{os.cpu_count()} cores ({usable} usable), {_cpu_model()}, {_memory_gib()}, "
            f"{platform.system()} {platform.release()}")


def versions() -> str:
    """Python and the key packages that are installed (absent ones are left out)."""
    found = []
    for name in KEY_PACKAGES:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return f"Python {platform.python_version()}; " + ", ".join(found)


def _load(load: tuple[float, float, float]) -> str:
    return " / ".join(f"{x:.2f}" for x in load)


def header_fields(load_before: tuple[float, float, float] | None = None) -> dict[str, str]:
    """Commit, load (1/5/15 min) before and after, machine, software: the header of a results file."""
    before = load_before or _LOAD_AT_IMPORT
    return dict(zip(HEADER_FIELDS, (_COMMIT_AT_IMPORT or commit(), f"{_load(before)} before, {_load(os.getloadavg())} after",
                                    machine(), versions()), strict=True))


def _header(fields: Mapping[str, str]) -> str:
    return "\n\n".join(f"{k}: {v}" for k, v in fields.items()) + "\n\n"


def _cell(text: str) -> str | float:
    try:
        return float(text)
    except ValueError:
        return text


def tables(text: str) -> list[dict[str, Any]]:
    """Every markdown table of ``text``: the heading above it, its columns and its rows (a cell that is
    one number becomes a number)."""
    out: list[dict[str, Any]] = []
    heading, lines, i = "", text.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        if line.startswith("|") and i + 1 < len(lines) and set(lines[i + 1].strip()) <= set("|-: "):
            split = lambda row: [c.strip() for c in row.strip().strip("|").split("|")]  # noqa: E731
            rows, j = [], i + 2
            while j < len(lines) and lines[j].startswith("|"):
                rows.append([_cell(c) for c in split(lines[j])])
                j += 1
            out.append({"heading": heading, "columns": split(line), "rows": rows})
            i = j
            continue
        i += 1
    return out


def _command(text: str) -> str | None:
    found = re.search(r"(?:Made by|Command:) `(python [^`]+)`", text)
    return found.group(1) if found else None


def publish(text: str, out: Path, load_before: tuple[float, float, float] | None = None, *,
            figures: Mapping[str, Any] | None = None) -> None:
    """Print the page and write it to ``out`` (the results file the README links to) under its header,
    and ``out`` with ``.json``: header fields, command, ``figures`` (named figures the script computed,
    the ones the README quotes) and every table."""
    from figures import derived  # benchmarks/figures.py reads this module's tables()

    fields = header_fields(load_before)
    full = _header(fields) + text.strip("\n") + "\n"
    print(full)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(full)
    record = {**fields, "command": _command(text), "figures": {**derived(text), **(figures or {})},
              "tables": tables(text)}
    out.with_suffix(".json").write_text(json.dumps(record, indent=1, default=float) + "\n")


def read_header(text: str) -> dict[str, str]:
    """The header fields of a results file (empty when its first line is not ``commit: ...``)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition(": ")
        if not sep or key not in HEADER_FIELDS or (not fields and key != "commit"):
            break
        fields[key] = value.strip()
    return fields


def migrate(path: Path) -> bool:
    """A results file made before the header: its provenance section becomes the header (the same
    facts, moved), and a JSON of its tables is written beside it (no named figures: only its script
    knows them). False when the file already has a header or has no provenance section."""
    text = path.read_text()
    if read_header(text) or PROVENANCE_HEADING not in text:
        return False
    body, prov = text.split(PROVENANCE_HEADING, 1)
    fields = {}
    for line in prov.splitlines():
        key, sep, value = line.removeprefix("- ").partition(": ")
        if sep and key in HEADER_FIELDS:
            fields[key] = value.strip()
    if "commit" not in fields:
        return False
    listed = re.fullmatch(r"(\w+) dirty \(tracked files changed: \d+: (.*)\)", fields["commit"])
    if listed and not listed.group(2).endswith("...") and all(
            f.strip().startswith(NOT_CODE) for f in listed.group(2).split(",")):
        fields["commit"] = listed.group(1)  # only results and prose differed: what ``commit()`` now says
    path.write_text(_header(fields) + body.strip("\n") + "\n")
    record = {**fields, "command": _command(body), "figures": {}, "tables": tables(body),
              "migrated": "provenance moved from the end of the page; figures not named (re-run its script)"}
    path.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n")
    return True


def refigure(path: Path) -> bool:
    """Recompute the ``figures`` of a results file's JSON from its page (benchmarks/figures.py), for a
    page written before its extractor existed; the figures a script passed itself are kept. False
    when the page's script has no extractor or the file has no JSON."""
    from figures import derived

    record_path = path.with_suffix(".json")
    found = derived(path.read_text())
    if not found or not record_path.is_file():
        return False
    record = json.loads(record_path.read_text())
    record["figures"] = {**record.get("figures", {}), **found}
    record_path.write_text(json.dumps(record, indent=1) + "\n")
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Give results files made before the header their header and JSON.")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--migrate", nargs="+", type=Path, metavar="RESULTS.md")
    mode.add_argument("--refigure", nargs="+", type=Path, metavar="RESULTS.md",
                      help="recompute the JSON's figures from the page (benchmarks/figures.py)")
    args = ap.parse_args(argv)
    for path in args.migrate or []:
        print(f"{path}: {'migrated' if migrate(path) else 'left as it is (header present or no provenance)'}")
    for path in args.refigure or []:
        print(f"{path}: {'figures recomputed' if refigure(path) else 'no extractor for its script, or no JSON'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

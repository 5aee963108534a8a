"""Each figure the README's benchmark tables quote names the JSON field it comes from.

A figure in a ``result`` cell is written with a marker right after it (an HTML comment, so the page
reads as before): ``17<!--f:better--> of 22<!--f:with_recipe-->``, ``1.83<!--f:gap_median_pct--> %``.
The field is looked up in ``figures`` of the JSON beside the results file the row links
(``benchmarks/results/X.md`` -> ``X.json``; with several links, ``<!--f:X:field-->`` says which), and
the figure must be the field's value rounded to the figure's decimals. A word can be checked too:
``none<!--f:worse=0-->`` (the field must equal 0).

Which numbers must carry a marker: a number with a decimal point, a percentage, a ratio written
``1.83x``, an integer of three or more digits, and both counts of ``N of M``. Not: code spans, link
texts, a number after ``target`` (a goal, not a measurement), parameters written ``p = 8``, and a
number marked as an input of the measurement (a threshold, a case's size): ``within 15<!--in--> %``,
and a number that is part of a name (``1.5B``, ``1.5p``, ``24k``).

    python benchmarks/readme_figures.py            # every README figure against its field
    python benchmarks/readme_figures.py --write    # rewrite marked figures from their fields
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
RESULT_COLUMN = "result"

_LINK = re.compile(r"\]\((?:\.\./)?(benchmarks/results/[^)\s]+\.md)\)")
_MD_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_CODE = re.compile(r"`[^`]*`")
_MARKER = r"<!--f:(?P<{0}>[^=>]+?)(?:=(?P<{1}>[^>]+?))?-->"
#: A marked word, a number (with its unit, the marker before or after the unit), or a marker alone
#: (consumed, so the digits of a field name are never read as a figure). A sign is a sign only after a
#: space or bracket: in ``0.02-1.95 %`` the hyphen is a range.
_TOKEN = re.compile(
    r"(?<![A-Za-z])(?P<word>[A-Za-z]+)" + _MARKER.format("wfield", "wexpect")
    + r"|(?P<number>(?<![^\s(\[:])[-+]\d+(?:\.\d+)?|(?<![\w.])\d+(?:\.\d+)?)(?:" + _MARKER.format("field", "expect") + r"|(?P<input><!--in-->))?"
    + r"(?P<unit>\s?%|x(?![A-Za-z]))?(?:" + _MARKER.format("field2", "expect2") + r"|(?P<input2><!--in-->))?"
    + r"|<!--.*?-->")
_OF = re.compile(r"(?<![\w.])\d+(?:<!--f:[^>]*-->)? of \d+")
_EXEMPT = re.compile(r"(?:target:?\s*|\b[pmv]\s?=\s?)$")


@dataclass(frozen=True)
class Figure:
    line: int  # 1-based line of the page
    text: str  # as quoted, e.g. "1.83 %" or "none"
    value: float | None  # None for a word
    decimals: int
    field: str | None  # the marker's field, None when unmarked
    expect: str | None  # a word's expected value
    files: tuple[str, ...]  # the results files the row links
    required: bool  # a figure that must carry a marker

    @property
    def where(self) -> str:
        return f"README.md:{self.line}: {self.text!r}"


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def md_tables(lines: list[str]) -> list[tuple[int, list[str], list[str]]]:
    """(index of the header line, the caption paragraph's lines, the table's lines) of every markdown
    table (tests/test_readme_figures.py reads docs pages with it too)."""
    found, i = [], 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and set(lines[i + 1].strip()) <= set("|-: "):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            k = i
            while k > 0 and lines[k - 1].strip():
                k -= 1
            found.append((i, lines[k:i], lines[i:j]))
            i = j
        else:
            i += 1
    return found


def _cell_figures(cell: str, line: int, files: tuple[str, ...]) -> list[Figure]:
    plain = _CODE.sub(lambda m: " " * len(m.group(0)), cell)
    plain = _MD_LINK.sub(lambda m: " " * len(m.group(0)), plain)
    counted = {}  # start of each count of "N of M" -> start of its N (a target's M is a target too)
    for m in _OF.finditer(plain):
        counted[m.start()] = counted[m.end() - len(m.group(0).rsplit(" ", 1)[1])] = m.start()
    out = []
    for m in _TOKEN.finditer(plain):
        if m.group("word"):
            out.append(Figure(line, m.group("word"), None, 0, m.group("wfield"), m.group("wexpect"), files, False))
            continue
        number = m.group("number")
        if number is None:
            continue
        if not (m.group("field") or m.group("field2") or m.group("unit")) and plain[m.end():m.end() + 1].isalpha():
            continue  # part of a name: 1.5B, 1.5p, 24k, 8th
        decimals = len(number.split(".")[1]) if "." in number else 0
        exempt = bool(_EXEMPT.search(plain[: counted.get(m.start(), m.start())]) or m.group("input") or m.group("input2"))
        required = not exempt and ("." in number or bool(m.group("unit")) or len(number.lstrip("+-")) >= 3
                                   or m.start() in counted)
        text = number + (m.group("unit") or "")
        field, expect = (m.group("field"), m.group("expect")) if m.group("field") else (m.group("field2"), m.group("expect2"))
        out.append(Figure(line, text, float(number), decimals, field, expect, files, required))
    return out


def figures(text: str) -> list[Figure]:
    """Every number (and marked word) in the ``result`` column of the page's benchmark tables."""
    lines = text.splitlines()
    out: list[Figure] = []
    for start, _, table in md_tables(lines):
        header = [h.lower() for h in cells(table[0])]
        if RESULT_COLUMN not in header or "benchmarks/" not in "\n".join(table):
            continue
        column = header.index(RESULT_COLUMN)
        for offset, row in enumerate(table[2:], start=2):
            row_cells = cells(row)
            if column < len(row_cells):
                out += _cell_figures(row_cells[column], start + offset + 1, tuple(_LINK.findall(row)))
    return out


def _json(results_md: str) -> dict[str, Any] | None:
    path = (ROOT / results_md).with_suffix(".json")
    return json.loads(path.read_text()) if path.is_file() else None


def lookup(figure: Figure) -> tuple[str, Any]:
    """(results file, the field's value) of a marked figure; KeyError saying what is missing."""
    assert figure.field is not None
    stem, sep, name = figure.field.partition(":")
    if sep:
        chosen = [f for f in figure.files if Path(f).stem == stem]
        if not chosen:
            raise KeyError(f"the marker names {stem}, which the row does not link")
    else:
        name, chosen = stem, list(figure.files[:1])
    if not chosen:
        raise KeyError("the row links no results file")
    record = _json(chosen[0])
    if record is None:
        raise KeyError(f"{chosen[0]} has no JSON beside it")
    value: Any = record.get("figures", {})
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(f"{Path(chosen[0]).with_suffix('.json').name} has no figures field {name!r}")
        value = value[part]
    return chosen[0], value


def problem(figure: Figure) -> str | None:
    """Why ``figure`` is not backed by its field (None when it is)."""
    if figure.field is None:
        return f"{figure.where} names no JSON field (write it as {figure.text}<!--f:FIELD-->)" if figure.required else None
    try:
        source, value = lookup(figure)
    except KeyError as e:
        return f"{figure.where}: {e.args[0]}"
    if figure.expect is not None:
        ok = str(value) == figure.expect or (isinstance(value, int | float) and _float(figure.expect) == value)
        return None if ok else f"{figure.where}: {figure.field} is {value!r} in {source}, not {figure.expect}"
    if not isinstance(value, int | float):
        return f"{figure.where}: {figure.field} is {value!r} in {source}, not a number"
    if figure.value is None:
        return f"{figure.where}: a marked word needs the value it stands for (word<!--f:FIELD=VALUE-->)"
    if abs(value - figure.value) > 0.5 * 10 ** -figure.decimals + 1e-9:
        return f"{figure.where}: {figure.field} is {value} in {source}"
    return None


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def write(text: str) -> str:
    """``text`` with every marked number replaced by its field's value at the same decimals."""
    lines = text.splitlines(keepends=True)
    for figure in figures(text):
        if figure.field is None or figure.value is None or figure.expect is not None:
            continue
        try:
            _, value = lookup(figure)
        except KeyError:
            continue
        if not isinstance(value, int | float):
            continue
        old = figure.text.split("%")[0].rstrip("x").strip()
        new = f"{value:+.{figure.decimals}f}" if old.startswith("+") else f"{value:.{figure.decimals}f}"
        marker = re.escape(f"<!--f:{figure.field}-->")
        lines[figure.line - 1] = re.sub(r"(?<![\w.])" + re.escape(old) + r"(?=" + marker + r"|(\s?%|x)" + marker + ")",
                                        new, lines[figure.line - 1], count=1)
    return "".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite marked figures from their JSON fields")
    args = ap.parse_args(argv)
    if args.write:
        README.write_text(write(README.read_text()))
    problems = [p for p in map(problem, figures(README.read_text())) if p]
    print("\n".join(problems) or "every README figure matches its field")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

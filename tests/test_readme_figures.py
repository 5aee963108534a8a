"""Every figure the README's benchmark tables quote is in the results file its row links to.

A README figure goes stale silently when a benchmark is re-run and the prose is not updated (or the
other way round). This test reads every README table that names a ``benchmarks/`` command or result,
takes each measured figure in it and looks for it in the results file that row links to (or, for a
table whose rows link nothing, the file its caption paragraph links to).

What counts as a figure: a number with a decimal point, a percentage, or an integer of three or
more digits (``156%``, ``13.1``, ``0.83``, ``7902``). Small integers are counts and parameters
(``p = 8``, ``10 of 12``) and are not checked; neither are code spans (commands) nor columns that
state inputs rather than measurements (command, target, budget). A figure matches a number in the
file when that number rounds to it at the figure's precision (``0.83`` matches ``0.828``); a
percentage also matches the file's fraction (``4.33 %`` matches ``0.0433``). The file's header
(commit, load, machine) is not searched, so a load average cannot stand in for a figure.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from report import read_header  # noqa: E402

README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]  # figures quoted in docs/ pages are checked too
PROVENANCE_HEADING = "## Provenance"  # where results files made before the header kept it

_LINK = re.compile(r"\]\((?:\.\./)?(benchmarks/results/[^)\s]+\.md)\)")  # README, or docs/ (../)
_MD_LINK = re.compile(r"\[[^\]]*\]\([^)]*\)")
_CODE = re.compile(r"`[^`]*`")
_FIGURE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(\s?%)?")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_INPUT_COLUMNS = ("command", "target", "budget")


@dataclass(frozen=True)
class Figure:
    line: int  # 1-based README line
    text: str  # as quoted, e.g. "4.33 %"
    value: float
    decimals: int
    percent: bool
    files: tuple[str, ...]


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _tables(lines: list[str]) -> list[tuple[int, list[str]]]:
    """(index of the first line, caption + table lines) for every markdown table."""
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
    return [(start, caption, table) for start, caption, table in found]  # type: ignore[misc]


def figures(readme: str) -> tuple[list[Figure], list[str]]:
    """The checked figures of every benchmark table, and the rows that quote figures but link no file."""
    lines = readme.splitlines()
    out: list[Figure] = []
    unlinked: list[str] = []
    for start, caption, table in _tables(lines):
        caption_text = " ".join(caption)
        if "benchmarks/" not in caption_text + " ".join(table):
            continue
        caption_links = tuple(_LINK.findall(caption_text))
        header = [h.lower() for h in _cells(table[0])]
        for offset, row in enumerate(table[2:], start=2):
            files = tuple(_LINK.findall(row)) or caption_links
            for column, cell in zip(header, _cells(row), strict=False):
                if any(word in column for word in _INPUT_COLUMNS):
                    continue
                plain = _CODE.sub(" ", _MD_LINK.sub(" ", cell))
                for m in _FIGURE.finditer(plain):
                    number, percent = m.group(1), bool(m.group(2))
                    if "." not in number and not percent and len(number) < 3:
                        continue
                    figure = Figure(start + offset + 1, m.group(0).strip(), float(number),
                                    len(number.split(".")[1]) if "." in number else 0, percent, files)
                    if files:
                        out.append(figure)
                    else:
                        unlinked.append(f"README.md:{figure.line}: {figure.text!r} (row links no results file)")
    return out, unlinked


def numbers_in(path: Path) -> list[float]:
    """Every number of a results file, its header (commit, load, machine) left out."""
    text = path.read_text()
    header = read_header(text)
    body = [line for line in text.splitlines() if not any(line.startswith(f"{k}: ") for k in header)]
    return [float(x) for x in _NUMBER.findall("\n".join(body).split(PROVENANCE_HEADING, 1)[0])]


def found(figure: Figure, numbers: list[float]) -> bool:
    tolerance = 0.5 * 10 ** -figure.decimals + 1e-9
    candidates = [(y, y * 100) if figure.percent else (y,) for y in numbers]
    return any(abs(c - figure.value) <= tolerance for pair in candidates for c in pair)


def test_parser_reads_a_row_and_its_rounding() -> None:
    """The rules above on a two-row table: a rounded figure is found, a stale one is not."""
    readme = ("| benchmark | command | result |\n|---|---|---|\n"
              "| x at p = 8 | `python benchmarks/x.py --limit 2.5` | **0.83** and 4.33 % and 7902 req/s, "
              "10 of 12 ([x.md](benchmarks/results/x.md)) |\n")
    figs, unlinked = figures(readme)
    assert [(f.text, f.files) for f in figs] == [("0.83", ("benchmarks/results/x.md",)),
                                                 ("4.33 %", ("benchmarks/results/x.md",)),
                                                 ("7902", ("benchmarks/results/x.md",))]
    assert unlinked == []
    assert found(figs[0], [0.828]) and not found(figs[0], [0.82, 0.8351])
    assert found(figs[1], [0.0433]) and found(figs[1], [4.33]) and not found(figs[1], [0.044])
    assert not found(figs[2], [7900.0])


def test_every_readme_figure_is_in_its_results_file() -> None:
    figs, unlinked = figures(README.read_text())
    assert figs, "no benchmark figures found in README.md: has the table layout changed?"
    problems = []
    for page in PAGES:
        problems += _stale(page.relative_to(ROOT).as_posix(), page.read_text())
    if problems:
        pytest.fail("README/docs figures that their results files do not hold:\n" + "\n".join(problems), pytrace=False)


def _stale(name: str, text: str) -> list[str]:
    """Every figure of ``text`` not found in the results file its row links; for the README also the
    figures that link no results file (docs/ pages may quote a one-off command's output beside it)."""
    figs, unlinked = figures(text)
    problems = unlinked if name == "README.md" else []
    cache: dict[str, list[float]] = {}
    for figure in figs:
        missing = [f for f in figure.files if not (ROOT / f).is_file()]
        if missing:
            problems.append(f"{name}:{figure.line}: links {', '.join(missing)}, which does not exist")
            continue
        for f in figure.files:
            cache.setdefault(f, numbers_in(ROOT / f))
        if not any(found(figure, cache[f]) for f in figure.files):
            problems.append(f"{name}:{figure.line}: figure {figure.text!r} not found in {', '.join(figure.files)}")
    return problems

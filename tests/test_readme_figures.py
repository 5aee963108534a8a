"""Every figure the README's benchmark tables quote is a named field of its results file's JSON.

A README figure goes stale silently when a benchmark is re-run and the prose is not updated (or the
other way round), and a figure that is merely *somewhere* in a page can match the wrong row. So each
figure in a README ``result`` cell names its field (``benchmarks/readme_figures.py`` says how:
``17<!--f:better--> of 22<!--f:with_recipe-->``) and must be that field's value rounded to the
figure's decimals; counts (``N of M``) included.

A results file still waiting for the re-run that gives its JSON the fields (``run_all.RERUN_PENDING``)
has its figures looked for in its page instead, as before: a number that rounds to the figure.
``docs/`` pages keep that rule too: a figure in a table that names a ``benchmarks/`` command or
result is looked for in the file its row (or the table's caption) links; small integers are counts
or parameters there and are not checked; a percentage also matches the file's fraction.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import readme_figures  # noqa: E402
import run_all  # noqa: E402
from report import read_header  # noqa: E402

README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").rglob("*.md"))  # design records under docs/design/ too

_LINK = re.compile(r"\]\((?:\.\./)*(benchmarks/results/[^)\s]+\.md)\)")
_MD_LINK = re.compile(r"\[[^\]]*\]\([^)]*\)")
_CODE = re.compile(r"`[^`]*`")
_FIGURE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(\s?%)?")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_INPUT_COLUMNS = ("command", "target", "budget")


# --- the README: named fields ---------------------------------------------------------------------

def test_markers_name_fields_counts_are_figures_and_targets_are_not() -> None:
    page = ("| what | command | result |\n|---|---|---|\n"
            "| x at p = 128 | `python benchmarks/x.py --limit 2.5` | **0.83x<!--f:ratio-->** and 4.33<!--f:gap--> %, "
            "10<!--f:n--> of 12<!--f:of-->, worse on none<!--f:worse=0-->, 7 of 9 (target: 6 of 8), "
            "within 2.5<!--in--> % on 1.5B at 1.5p, "
            "([x.md](benchmarks/results/x.md)) |\n")
    page += "| y | `python benchmarks/y.py` | 0.02<!--f:a-->-1.95<!--f:b--> % and -1.8<!--f:c--> % ([y.md](benchmarks/results/y.md)) |\n"
    figs = readme_figures.figures(page)
    marked = [(f.text, f.field) for f in figs if f.field]
    assert marked == [("0.83x", "ratio"), ("4.33 %", "gap"), ("10", "n"), ("12", "of"), ("none", "worse"),
                      ("0.02", "a"), ("1.95 %", "b"), ("-1.8 %", "c")]  # a hyphen between numbers is a range
    unmarked = [f.text for f in figs if not f.field and f.required]
    assert unmarked == ["7", "9"]  # a count; the target's counts and p = 128 are not figures
    assert all(f.files == ("benchmarks/results/x.md",) for f in figs if f.field not in ("a", "b", "c"))


def test_a_figure_is_its_field_rounded(monkeypatch: pytest.MonkeyPatch) -> None:
    record = {"figures": {"ratio": 0.8281, "gap": 4.34, "n": 10, "of": 12, "worse": 0}}
    monkeypatch.setattr(readme_figures, "_json", lambda md: record)
    page = ("| what | command | result |\n|---|---|---|\n| x | `python benchmarks/x.py` | 0.83x<!--f:ratio-->, "
            "4.33<!--f:gap--> %, 10<!--f:n--> of 12<!--f:of-->, none<!--f:worse=0-->, 3<!--f:missing--> "
            "([x.md](benchmarks/results/x.md)) |\n")
    problems = [readme_figures.problem(f) for f in readme_figures.figures(page)]
    assert problems[0] is None and problems[2] is None and problems[3] is None and problems[4] is None
    assert problems[1] is not None and "gap is 4.34" in problems[1]
    assert problems[5] is not None and "no figures field 'missing'" in problems[5]
    assert "4.34<!--f:gap--> %" in readme_figures.write(page)


def test_every_readme_figure_is_its_named_field() -> None:
    figs = readme_figures.figures(README.read_text())
    assert sum(f.field is not None for f in figs) >= 20, "the README's benchmark table lost its markers?"
    problems = []
    for figure in figs:
        why = readme_figures.problem(figure)
        pending = [f for f in figure.files if Path(f).name in run_all.RERUN_PENDING]
        if why and pending and figure.field and "has no" in why:
            # waiting for the re-run that names its fields: the figure must still be in its page
            if figure.value is not None and figure.required and not _in_any(figure, pending):
                problems.append(f"{figure.where} not in {', '.join(pending)} (pending its re-run)")
            continue
        if why:
            problems.append(why)
    assert not problems, "README figures not backed by their JSON fields:\n" + "\n".join(problems)


def _in_any(figure: readme_figures.Figure, files: list[str]) -> bool:
    old = Figure(figure.line, figure.text, abs(figure.value or 0.0), figure.decimals, "%" in figure.text, tuple(files))
    if "." not in figure.text and "%" not in figure.text and len(str(int(old.value))) < 3:
        return True  # a count: the page cannot show it, its JSON will
    return any(found(old, numbers_in(ROOT / f)) for f in files)


# --- docs pages: found in the linked file ---------------------------------------------------------

@dataclass(frozen=True)
class Figure:
    line: int  # 1-based line
    text: str  # as quoted, e.g. "4.33 %"
    value: float
    decimals: int
    percent: bool
    files: tuple[str, ...]


def page_figures(text: str) -> list[Figure]:
    """The checked figures of every benchmark table of a docs page."""
    out: list[Figure] = []
    for start, caption, table in readme_figures.md_tables(text.splitlines()):
        caption_text = " ".join(caption)
        if "benchmarks/" not in caption_text + " ".join(table):
            continue
        caption_links = tuple(_LINK.findall(caption_text))
        header = [h.lower() for h in readme_figures.cells(table[0])]
        for offset, row in enumerate(table[2:], start=2):
            files = tuple(_LINK.findall(row)) or caption_links
            for column, cell in zip(header, readme_figures.cells(row), strict=False):
                if any(word in column for word in _INPUT_COLUMNS) or not files:
                    continue
                plain = _CODE.sub(" ", _MD_LINK.sub(" ", cell))
                for m in _FIGURE.finditer(plain):
                    number, percent = m.group(1), bool(m.group(2))
                    if "." not in number and not percent and len(number) < 3:
                        continue
                    out.append(Figure(start + offset + 1, m.group(0).strip(), float(number),
                                      len(number.split(".")[1]) if "." in number else 0, percent, files))
    return out


def numbers_in(path: Path) -> list[float]:
    """Every number of a results file, its header (commit, load, machine) left out."""
    lines = path.read_text().splitlines()
    header = read_header(path.read_text())
    body = lines
    if header:  # the header lines, each followed by a blank line
        body = [line for line in lines if not any(line.startswith(f"{k}: ") for k in header)]
    return [float(x) for x in _NUMBER.findall("\n".join(body).split("## Provenance", 1)[0])]


def found(figure: Figure, numbers: list[float]) -> bool:
    tolerance = 0.5 * 10 ** -figure.decimals + 1e-9
    candidates = [(y, y * 100) if figure.percent else (y,) for y in numbers]
    return any(abs(c - figure.value) <= tolerance for pair in candidates for c in pair)


def test_docs_rule_reads_a_row_and_its_rounding() -> None:
    page = ("| benchmark | command | result |\n|---|---|---|\n"
            "| x at p = 8 | `python benchmarks/x.py --limit 2.5` | **0.83** and 4.33 % and 7902 req/s, "
            "10 of 12 ([x.md](benchmarks/results/x.md)) |\n")
    figs = page_figures(page)
    assert [(f.text, f.files) for f in figs] == [("0.83", ("benchmarks/results/x.md",)),
                                                 ("4.33 %", ("benchmarks/results/x.md",)),
                                                 ("7902", ("benchmarks/results/x.md",))]
    assert found(figs[0], [0.828]) and not found(figs[0], [0.82, 0.8351])
    assert found(figs[1], [0.0433]) and found(figs[1], [4.33]) and not found(figs[1], [0.044])
    assert not found(figs[2], [7900.0])


@pytest.mark.parametrize("page", DOCS, ids=lambda p: str(p.relative_to(ROOT / "docs")))
def test_every_docs_figure_is_in_its_results_file(page: Path) -> None:
    problems, cache = [], {}
    for figure in page_figures(page.read_text()):
        missing = [f for f in figure.files if not (ROOT / f).is_file()]
        if missing:
            problems.append(f"{page.name}:{figure.line}: links {', '.join(missing)}, which does not exist")
            continue
        for f in figure.files:
            cache.setdefault(f, numbers_in(ROOT / f))
        if not any(found(figure, cache[f]) for f in figure.files):
            problems.append(f"{page.name}:{figure.line}: figure {figure.text!r} not found in {', '.join(figure.files)}")
    assert not problems, "docs figures that their results files do not hold:\n" + "\n".join(problems)

"""Every relative link of the README and the docs resolves, and the user pages name no issue.

A page moved to ``docs/design/`` (or a heading renamed) leaves links that GitHub renders as 404s or
as anchors that scroll nowhere; nothing else notices. So every ``[text](path)`` and
``[text](path#anchor)`` of README.md and docs/**/*.md must name an existing file, and an anchor must
be the slug of a heading of that page (GitHub's rule: lowercase, punctuation dropped, spaces to
hyphens, repeats numbered); a results file linked before its first run is excused while
``run_all.RERUN_PENDING`` lists it (tests/test_results_current.py keeps that list honest). Paths a source file names (``docs/limits.md`` in a docstring or an error
message) must exist too. User pages (README.md, docs/*.md) are guides: a reader does not know the
project's issue numbers, so they name none; design records under docs/design/ may tell history.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import run_all  # noqa: E402

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
USER_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^\s*```.*?^\s*```", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
_ISSUE = re.compile(r"\bissues?\s*#?\d+|\(issue\b|\bthe issue\b|\bissue's\b", re.I)
_DOC_PATH = re.compile(r"(?<![\w/.])(docs/[\w./-]+\.md)")


def prose(text: str) -> str:
    """The page without its code (fenced blocks and inline spans): a link shown as code is not one."""
    return _CODE.sub("", _FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text: link text kept, lowercase, only letters, digits, ``_``,
    ``-`` and spaces kept, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a page; a repeated slug gets ``-1``, ``-2``, ... as GitHub numbers it."""
    seen: Counter[str] = Counter()
    out = set()
    for heading in _HEADING.findall(_FENCE.sub("", page.read_text())):
        base = slug(heading)
        out.add(base if not seen[base] else f"{base}-{seen[base]}")
        seen[base] += 1
    return out


def links(page: Path) -> list[tuple[str, Path, str]]:
    """(as written, target file, anchor) for each relative link of a page."""
    out = []
    for target in _LINK.findall(prose(page.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        out.append((target, (page.parent / path).resolve() if path else page, anchor))
    return out


def test_slugs_follow_githubs_rule() -> None:
    assert slug("The step a data-parallel job pays: gradient sync and optimizer") == \
        "the-step-a-data-parallel-job-pays-gradient-sync-and-optimizer"
    assert slug("`zb-v-greedy`") == "zb-v-greedy"
    assert slug("2b. The exact model with pairs (`cpsat`, `solver/exact/cpsat/overlap.py`)") == \
        "2b-the-exact-model-with-pairs-cpsat-solverexactcpsatoverlappy"
    assert slug("See [costs](costs.md) ≤ 2×") == "see-costs--2"


def test_repeated_headings_are_numbered(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("# A\n\n## Results\n\n```\n# not a heading\n```\n\n## Results\n")
    assert anchors(page) == {"a", "results", "results-1"}


def test_links_skip_code_and_urls(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("[a](b.md#c) `[x](y.md)` [u](https://e.org/z)\n```\n[f](g.md)\n```\n[s](#top)\n")
    assert [(t, a) for t, _, a in links(page)] == [("b.md#c", "c"), ("#top", "top")]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for written, target, anchor in links(page):
        pending = target.parent == ROOT / "benchmarks" / "results" and target.name in run_all.RERUN_PENDING
        if not target.exists() and not pending:
            broken.append(f"{written}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{written}: no heading '{anchor}' in {target.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}:\n" + "\n".join(broken)


def test_the_issue_rule_reads_references_not_words() -> None:
    named = ["(issue 12)", "issue #3", "Issues 11", "the issue's target", "(issue, target 2)", "fixed the issue"]
    plain = ["every rank pair thus issues its sends", "a GitHub issue (google/or-tools#5048)", "issued at 12"]
    assert all(_ISSUE.search(t) for t in named) and not any(_ISSUE.search(t) for t in plain)


def test_user_pages_name_no_issue() -> None:
    named = [f"{page.relative_to(ROOT)}:{n}: {m.group(0)!r}" for page in USER_PAGES
             for n, line in enumerate(page.read_text().splitlines(), start=1) for m in _ISSUE.finditer(line)]
    assert not named, "user pages are guides; say what was found, not which issue asked:\n" + "\n".join(named)


#: Source files that still name a page by its old path, waiting for a change of that file already in
#: progress (an edit of solver/ alone counts toward the results files' staleness, see run_all): each
#: entry is (file, old path, new path). The test fails on an entry that was followed, so this only shrinks.
MOVED_PENDING: set[tuple[str, str, str]] = set()


def test_docs_paths_named_in_the_code_exist() -> None:
    sources = [p for folder in ("solver", "api", "runtime", "benchmarks", "tests", "examples")
               for p in (ROOT / folder).rglob("*.py") if p != Path(__file__)] + PAGES
    named = {(str(p.relative_to(ROOT)), m) for p in sources for m in _DOC_PATH.findall(p.read_text())}
    pending = {(file, old) for file, old, new in MOVED_PENDING if (ROOT / new).is_file()}
    missing = sorted(f"{file}: {m}" for file, m in named - pending if not (ROOT / m).is_file())
    assert not missing, "pages named that do not exist (moved?):\n" + "\n".join(missing)
    followed = sorted(f"{file}: {old}" for file, old in pending - named)
    assert not followed, "followed: remove from MOVED_PENDING:\n" + "\n".join(followed)

"""Every flag the README and docs/ show on a ``pipesched COMMAND ...`` line is one that command accepts."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from pipesched.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])(?![\w-])")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    return dict(sub.choices) if sub else {}


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every command, and every ``COMMAND SUBCOMMAND`` pair (e.g. ``model transformer``)."""
    known = {}
    for name, parser in _subcommands(build_parser()).items():
        known[name] = parser
        known.update({f"{name} {sub}": p for sub, p in _subcommands(parser).items()})
    return known


def readme_uses() -> list[tuple[str, str, str]]:
    """(page:line, command, flag) for each flag after ``pipesched COMMAND`` on a README or docs line."""
    known = commands()
    uses = []
    for page in PAGES:
        for n, line in enumerate(page.read_text().splitlines(), start=1):
            uses += _line_uses(f"{page.relative_to(ROOT)}:{n}", line, known)
    return uses


def _line_uses(where: str, line: str, known: dict[str, argparse.ArgumentParser]) -> list[tuple[str, str, str]]:
    uses = []
    for match in re.finditer(r"\bpipesched\s+([a-z][a-z-]*)\b(?:\s+([a-z][a-z-]*)\b)?", line):
        command, end = match.group(1), match.end(1)
        if command not in known:
            continue
        if f"{command} {match.group(2)}" in known:  # a subcommand, e.g. ``model transformer``
            command, end = f"{command} {match.group(2)}", match.end()
        rest = re.split(r"\s(?:&&|\||;|#)\s|`", line[end:])[0]  # up to the end of this command
        uses += [(where, command, flag) for flag in FLAG.findall(rest)]
    return uses


def test_the_readme_shows_flags_of_the_commands() -> None:
    uses = readme_uses()
    assert {("solve", "--hint"), ("solve", "--backend"), ("batch", "--force"), ("model transformer", "--hidden"),
            ("plan", "--cluster")} <= {(c, f) for _, c, f in uses}


def test_every_flag_the_readme_shows_is_accepted() -> None:
    known = commands()
    unknown = [f"{where}: pipesched {c} {f}" for where, c, f in readme_uses()
               if f not in known[c]._option_string_actions]
    assert not unknown, "\n".join(unknown)

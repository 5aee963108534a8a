"""Every flag the README and docs/ show on a ``pipesched COMMAND ...`` line is one that command accepts."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from pipesched.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
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


def _code_lines(page: Path) -> list[tuple[int, str]]:
    """The lines of the page's fenced code blocks (what a reader copies), shell continuations (a
    trailing backslash) joined, by first line number."""
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    fenced = False
    for n, line in enumerate(page.read_text().splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            continue
        start, text = pending if pending else (n, "")
        text += line.rstrip("\\").rstrip() + " " if line.endswith("\\") else line
        pending = (start, text) if line.endswith("\\") else None
        if pending is None:
            out.append((start, text))
    return out


def test_every_complete_command_line_gives_the_required_options() -> None:
    """A command in a code block (no ``...`` in it) passes every option its command requires:
    the README's ``pipesched model transformer`` line once lacked ``--ffn`` and ``--microbatch-size``."""
    known = commands()
    missing = []
    for page in PAGES:
        for n, line in _code_lines(page):
            for match in re.finditer(r"\bpipesched\s+([a-z][a-z-]*)\b(?:\s+([a-z][a-z-]*)\b)?", line):
                command, end = match.group(1), match.end(1)
                if command not in known:
                    continue
                if f"{command} {match.group(2)}" in known:
                    command, end = f"{command} {match.group(2)}", match.end()
                rest = re.split(r"\s(?:&&|\||;|#)\s|`", line[end:])[0]
                if "..." in rest or "…" in rest or not FLAG.search(rest):
                    continue  # abbreviated on purpose, or a command named in prose
                given = set(FLAG.findall(rest))
                for action in known[command]._actions:
                    if action.required and action.option_strings and not given & set(action.option_strings):
                        missing.append(f"{page.relative_to(ROOT)}:{n}: pipesched {command} lacks "
                                       f"{action.option_strings[-1]}")
    assert not missing, "\n".join(missing)

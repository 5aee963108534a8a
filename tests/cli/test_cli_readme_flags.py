"""Every flag the README shows on a ``pipesched COMMAND ...`` line is one that command accepts."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from pipesched.cli import build_parser

README = Path(__file__).resolve().parents[2] / "README.md"
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])(?![\w-])")


def commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def readme_uses() -> list[tuple[int, str, str]]:
    """(line number, command, flag) for each flag after ``pipesched COMMAND`` on a README line."""
    known = commands()
    uses = []
    for n, line in enumerate(README.read_text().splitlines(), start=1):
        for match in re.finditer(r"\bpipesched\s+([a-z][a-z-]*)\b", line):
            command = match.group(1)
            if command not in known:
                continue
            rest = line[match.end():]
            rest = re.split(r"\s(?:&&|\||;|#)\s|`", rest)[0]  # up to the end of this command
            uses += [(n, command, flag) for flag in FLAG.findall(rest)]
    return uses


def test_the_readme_shows_flags_of_the_commands() -> None:
    uses = readme_uses()
    assert {("solve", "--hint"), ("solve", "--backend"), ("batch", "--force")} <= {(c, f) for _, c, f in uses}


def test_every_flag_the_readme_shows_is_accepted() -> None:
    known = commands()
    unknown = [f"README.md:{n}: pipesched {c} {f}" for n, c, f in readme_uses()
               if f not in known[c]._option_string_actions]
    assert not unknown, "\n".join(unknown)

"""Every constant of the budget either names the benchmark command that re-derives it or is marked
policy with its reason: a number that says neither cannot be checked when the code it times changes."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUDGETS = sorted((ROOT / "solver" / "budget").glob("*.py"))
_COMMAND = re.compile(r"python benchmarks/([\w]+\.py)")


def _documented(path: Path) -> dict[str, str]:
    """Each module-level UPPER_CASE constant -> the ``#:`` comment above it (constants written on
    consecutive lines share the block above the first)."""
    lines = path.read_text().splitlines()
    out: dict[str, str] = {}
    last_comment, last_end = "", -2
    for node in ast.parse(path.read_text()).body:
        if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.isupper() and not node.targets[0].id.startswith("_")):
            continue
        i, block = node.lineno - 2, []
        while i >= 0 and lines[i].startswith("#:"):
            block.insert(0, lines[i][2:].strip())
            i -= 1
        if block:
            last_comment = " ".join(block)
        elif node.lineno != last_end + 1:  # neither its own block nor right below a documented one
            last_comment = ""
        out[node.targets[0].id] = last_comment
        last_end = node.end_lineno or node.lineno
    return out


def _why(comment: str) -> str | None:
    """Why a comment does not document its constant, or None when it does."""
    commands = _COMMAND.findall(comment)
    missing = [c for c in commands if not (ROOT / "benchmarks" / c).exists()]
    if missing:
        return f"names benchmarks that do not exist: {missing}"
    if commands:
        return None
    if re.search(r"\bpolicy\b", comment, re.IGNORECASE) and len(comment) > 40:
        return None
    return "names no `python benchmarks/...` command that re-derives it and is not marked policy with a reason"


def test_every_budget_constant_names_its_command_or_says_policy() -> None:
    constants = {name: comment for path in BUDGETS for name, comment in _documented(path).items()}
    assert len(constants) > 40, "the parser found too few constants: the check would pass vacuously"
    bad = {name: why for name, comment in constants.items() if (why := _why(comment))}
    assert not bad, "\n".join(f"{name}: {why}" for name, why in sorted(bad.items()))


def test_the_check_refuses_a_bare_number_and_a_missing_script(tmp_path: Path) -> None:
    """Guard against a check that cannot fail."""
    module = tmp_path / "m.py"
    module.write_text("#: Share of the limit.\nA_SHARE = 0.2\n#: Measured: `python benchmarks/nope.py`.\nB_COST = 1e-4\n"
                      "#: Policy: half each, so neither phase starves.\nC_SHARE = 0.5\nD_SHARE = 0.5\n")
    found = {name: _why(comment) for name, comment in _documented(module).items()}
    assert found["A_SHARE"] is not None and "nope.py" in (found["B_COST"] or "")
    assert found["C_SHARE"] is None and found["D_SHARE"] is None

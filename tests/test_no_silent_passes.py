"""No test passes without checking: read the test files' syntax trees for the ways a test can.

- a ``return`` inside a ``test_*`` function (an early exit passes whatever follows unchecked: put the
  checks in if/else branches; a case that cannot be checked is ``pytest.skip(reason)``, or in a
  property test ``assume`` / ``reject``);
- ``pytest.importorskip`` or ``@pytest.mark.skipif`` (optional packages go through
  ``tests/requires.py``, which fails under the part's ``PIPESCHED_REQUIRE_*`` flag in CI);
- ``pytest.skip()`` without a reason;
- ``time.sleep`` (synchronise on a readiness signal instead);
- an ``assert`` that reads the clock (speed targets are ratios in ``benchmarks/``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
#: The folders this check covers (the other folders hold their own process and server plumbing).
SCOPE = ("solver", "planning", "costmodel", "cli")
CLOCK = {"perf_counter", "monotonic", "time", "perf_counter_ns", "monotonic_ns"}


def files() -> list[Path]:
    found = sorted(TESTS.glob("*.py")) + [f for d in SCOPE for f in sorted((TESTS / d).glob("*.py"))]
    return found


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def _own_nodes(fn: ast.AST) -> list[ast.AST]:
    """The nodes of a function's body, nested functions and lambdas left out."""
    out, stack = [], list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return out


def problems(source: str, name: str) -> list[str]:
    """Every silent pass of one test file, as ``name:line: what``."""
    tree = ast.parse(source)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            out += [f"{name}:{r.lineno}: return in {node.name}" for r in _own_nodes(node) if isinstance(r, ast.Return)]
        if isinstance(node, ast.Attribute) and _dotted(node) in ("pytest.importorskip", "pytest.mark.skipif"):
            out.append(f"{name}:{node.lineno}: {_dotted(node)} (use tests/requires.py)")
        if isinstance(node, ast.Call):
            called = _dotted(node.func)
            if called == "pytest.skip" and not (node.args or node.keywords):
                out.append(f"{name}:{node.lineno}: pytest.skip() without a reason")
            if called in ("time.sleep", "sleep", "asyncio.sleep"):
                out.append(f"{name}:{node.lineno}: {called} (wait on a readiness signal)")
        if isinstance(node, ast.Assert):
            clocks = [c for c in ast.walk(node.test) if isinstance(c, ast.Call)
                      and _dotted(c.func).split(".")[-1] in CLOCK and _dotted(c.func).startswith("time")]
            if clocks:
                out.append(f"{name}:{node.lineno}: assert on the wall clock")
    return out


def test_the_rules_catch_each_silent_pass() -> None:
    source = '''
import pytest, time
torch = pytest.importorskip("torch")
@pytest.mark.skipif(True, reason="x")
def test_a():
    if cond():
        return
    def helper():
        return 1
    pytest.skip()
    time.sleep(0.1)
    assert time.perf_counter() - t0 < 2
def test_b():
    pytest.skip("a reason")
'''
    found = sorted(p.split(": ", 1)[1] for p in problems(source, "x.py"))
    assert found == sorted(["pytest.importorskip (use tests/requires.py)", "pytest.mark.skipif (use tests/requires.py)",
                            "return in test_a", "pytest.skip() without a reason",
                            "time.sleep (wait on a readiness signal)", "assert on the wall clock"])


@pytest.mark.parametrize("path", files(), ids=lambda p: p.relative_to(TESTS).as_posix())
def test_no_test_passes_without_checking(path: Path) -> None:
    found = problems(path.read_text(), path.relative_to(ROOT).as_posix())
    assert not found, "\n".join(found)

"""tests/requires.py: a missing optional package skips with its reason locally and fails under its CI flag."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import requires
from requires import REQUIRED_BY, require

ROOT = Path(__file__).resolve().parent.parent
ABSENT = "pipesched_no_such_module_xyz"


@pytest.fixture()
def absent(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(REQUIRED_BY, ABSENT, ("PIPESCHED_REQUIRE_TESTFLAG", "nothing"))
    return ABSENT


def test_a_missing_module_skips_with_a_reason_without_its_flag(absent: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PIPESCHED_REQUIRE_TESTFLAG", raising=False)
    with pytest.raises(pytest.skip.Exception, match=f"{absent} is not installed"):
        require(absent)


def test_a_missing_module_fails_under_its_flag(absent: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIPESCHED_REQUIRE_TESTFLAG", "1")
    with pytest.raises(pytest.fail.Exception, match="PIPESCHED_REQUIRE_TESTFLAG=1 but"):
        require(absent)


def test_a_present_module_is_returned_and_an_unlisted_one_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(REQUIRED_BY, "json", ("PIPESCHED_REQUIRE_TESTFLAG", "nothing"))
    monkeypatch.setenv("PIPESCHED_REQUIRE_TESTFLAG", "1")
    import json

    assert require("json") is json
    assert require("json", load=False) is None
    with pytest.raises(KeyError, match="no PIPESCHED_REQUIRE_"):
        requires.flag_of("csv")


def test_every_flag_is_one_ci_sets() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    set_by_ci = set(re.findall(r"export (PIPESCHED_REQUIRE_\w+)=1", ci))
    missing = {flag for flag, _ in REQUIRED_BY.values()} - set_by_ci
    assert not missing, f"flags tests/requires.py uses that .ci/run does not set: {missing}"

"""A problem may name its units: charts and summaries label with them, the cache key ignores them."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pipesched.solver import Problem, solve
from pipesched.solver.cli import summary
from pipesched.solver.core.canonical import problem_key
from pipesched.solver.formats.render import render_svg

BASE = {"devices": 2, "microbatches": 3, "memory": {"limit": 3}}


def test_units_label_the_chart_and_the_summary() -> None:
    schedule = solve(Problem(**BASE, units={"time": "ms", "memory": "GiB"}), "1f1b")
    svg = render_svg(schedule)
    assert ">time (ms)</text>" in svg
    assert "limit 3 GiB" in svg
    text = summary(schedule)
    assert "(ms) · gap" in text
    assert "peak memory per device (GiB):" in text


def test_without_units_nothing_is_labelled() -> None:
    schedule = solve(Problem(**BASE), "1f1b")
    assert ">time</text>" in render_svg(schedule)
    assert "peak memory per device:" in summary(schedule)


def test_units_do_not_change_the_cache_key() -> None:
    assert problem_key(Problem(**BASE, units={"time": "ms"})) == problem_key(Problem(**BASE))


@pytest.mark.parametrize("bad", ["", "   ", "m\x00s", "x" * 17])
def test_a_bad_unit_name_is_refused_naming_the_field(bad: str) -> None:
    with pytest.raises(ValidationError) as err:
        Problem(**BASE, units={"time": bad})
    assert "units.time" in str(err.value)

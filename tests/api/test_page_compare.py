"""The web page in headless Chromium against a real server (issue 13, item 11): build a problem
with the builder, solve it with two methods, see both charts and their figures, download the files.

The browser resolves no host but loopback, and every request the page makes is checked to stay
on the service.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from api_servers import Server
from browser import playwright_browser

from pipesched.solver import Problem, Schedule, validate

BUILT = {
    "devices": 3, "microbatches": 5, "stages_per_device": 1, "placement": "loop", "split_backward": True,
    "objective": "makespan",
    "costs": {"forward": 1, "backward_input": 1.5, "backward_weight": 0.5, "comm": 0.1},
    "memory": {"forward": 1, "backward_input": 0, "backward_weight": -1, "limit": 3},
}


@pytest.fixture(scope="module")
def browser() -> Iterator:
    pw, chromium = playwright_browser()
    yield chromium
    chromium.close()
    pw.stop()


@pytest.fixture
def page(browser, server: Server) -> Iterator:  # noqa: ANN001
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(120_000)
    page.requests = []
    page.on("request", lambda request: page.requests.append(request.url))
    page.goto(f"{server.url}/")
    page.wait_for_function("document.querySelectorAll('#method-b option').length > 3")
    yield page
    context.close()


def _problem_json(page) -> dict:  # noqa: ANN001
    return json.loads(page.input_value("#problem"))


def _build(page, fields: dict[str, str]) -> None:  # noqa: ANN001
    for field, value in fields.items():
        page.fill(f"#{field}", value)


def test_build_solve_compare_and_download(page, server: Server, tmp_path: Path) -> None:  # noqa: ANN001
    _build(page, {"devices": "3", "microbatches": "5", "backward_input": "1.5", "backward_weight": "0.5",
                  "comm": "0.1", "limit": "3", "time_limit": "3"})
    assert _problem_json(page) == BUILT
    page.select_option("#method-a", "1f1b")
    page.select_option("#method-b", "auto")
    page.click("#solve")
    page.wait_for_function("document.querySelectorAll('.chart svg').length === 2 && "
                           "document.querySelectorAll('#figures tr').length > 1")

    schedules = {}
    for run, method in (("#run-a", "1f1b"), ("#run-b", "auto")):
        assert page.inner_text(f"{run} h2").startswith(method)
        chart = f"{run} .chart svg"
        assert page.locator(f"{chart} g.device").count() == 3, "one row per device"
        assert page.locator(f"{chart} g.memory").count() == 3, "one memory track per device"
        links = page.locator(f"{run} .downloads a")
        assert sorted(links.all_inner_texts()) == ["Gantt SVG", "schedule JSON", "torch CSV"]
        for href in links.evaluate_all("links => links.map(a => a.href)"):
            response = httpx.get(href, timeout=30)
            assert response.status_code == 200, href
            if "schedule.json" in href:
                schedules[method] = Schedule.model_validate_json(response.text)
            elif href.split("?")[0].endswith(".svg"):
                assert response.headers["content-type"].startswith("image/svg+xml")
                assert response.text.count('class="device"') == 3
            else:
                assert response.text.strip() and response.headers["content-type"].startswith("text/csv")

    for method, schedule in schedules.items():  # the files are valid schedules of the built problem
        assert schedule.problem == Problem.model_validate(BUILT) and validate(schedule) == [], method
        assert max(schedule.peak_memory) <= 3
    assert schedules["auto"].objective_value <= schedules["1f1b"].objective_value

    table = page.inner_text("#figures")
    for method, schedule in schedules.items():
        assert method in table
        assert f"{100 * schedule.bubble_ratio:.1f}%" in table, "bubble of each method"
    peaks = page.locator("#figures tr", has_text="peak memory (highest device)").inner_text()
    assert peaks.split("\t")[1:] == [f"{max(s.peak_memory):g}" for s in (schedules["1f1b"], schedules["auto"])]

    with page.expect_download() as download:  # the browser saves the file the link names
        page.click("#run-b .downloads a:has-text('schedule JSON')")
    saved = tmp_path / download.value.suggested_filename
    download.value.save_as(saved)
    assert saved.name == "schedule-auto.json"
    assert Schedule.model_validate_json(saved.read_text()).ops == schedules["auto"].ops

    outside = [u for u in page.requests if urlsplit(u).hostname not in ("127.0.0.1", "localhost")]
    assert outside == [], f"the page reached outside the service: {outside}"


def test_the_builder_writes_the_json_and_a_hand_edit_fills_the_builder(page) -> None:  # noqa: ANN001
    page.fill("#limit", "4, 4, 3, 3")
    assert _problem_json(page)["memory"]["limit"] == [4, 4, 3, 3]
    page.fill("#limit", "1.5x1f1b")  # not numbers: passed on as written, for the service to read
    assert _problem_json(page)["memory"]["limit"] == "1.5x1f1b"
    page.fill("#limit", "")
    assert _problem_json(page)["memory"]["limit"] is None
    page.select_option("#placement", "v")
    problem = _problem_json(page)
    assert (problem["placement"], problem["stages_per_device"]) == ("v", 2)
    page.uncheck("#split_backward")
    assert _problem_json(page)["split_backward"] is False

    edited = {**BUILT, "devices": 2, "costs": {**BUILT["costs"], "forward": [1, 2]}, "objective": "stage_span"}
    page.fill("#problem", json.dumps(edited))
    assert page.input_value("#devices") == "2" and page.input_value("#objective") == "stage_span"
    assert page.input_value("#limit") == "3"
    page.fill("#microbatches", "7")  # a builder edit keeps what the builder does not show
    assert _problem_json(page) == {**edited, "microbatches": 7}


def test_a_bad_problem_shows_the_services_error_naming_the_field(page) -> None:  # noqa: ANN001
    page.fill("#microbatches", "0")
    page.click("#solve")
    page.wait_for_function("document.querySelectorAll('.run-error:not(:empty)').length === 2")
    for run in ("#run-a", "#run-b"):
        assert "microbatches" in page.inner_text(f"{run} .run-error")
        assert page.locator(f"{run} .chart svg").count() == 0

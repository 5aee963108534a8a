"""Headless Chromium for the page and docs tests.

The browser is the system's (Debian: ``apt-get install -y chromium``), driven either directly
(``--dump-dom``) or through Playwright with ``executable_path`` (Playwright never downloads a
browser here). Without Chromium the tests skip, unless ``PIPESCHED_REQUIRE_BROWSER=1`` (CI), in
which case they fail: a CI machine without the browser must not pass by skipping.

``OFFLINE_ARGS`` make every host name but loopback unresolvable, so a page that still needs the
internet shows it in the test instead of quietly fetching from a CDN.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

OFFLINE_ARGS = ["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
BASE_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--disable-extensions", "--disable-background-networking", *OFFLINE_ARGS]


def _missing(what: str) -> None:
    if os.environ.get("PIPESCHED_REQUIRE_BROWSER") == "1":
        pytest.fail(f"PIPESCHED_REQUIRE_BROWSER=1 but {what}")
    pytest.skip(f"browser test: {what}")


def chromium() -> str:
    """Path of the Chromium binary, or skip (fail under PIPESCHED_REQUIRE_BROWSER=1)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    _missing("no chromium on PATH (apt-get install -y chromium)")
    raise AssertionError("unreachable")


def dump_dom(url: str, budget_ms: int = 15000, timeout_s: float = 120) -> str:
    """The DOM after the page's scripts ran (virtual time lets timers and fetches finish)."""
    out = subprocess.run([chromium(), *BASE_ARGS, f"--virtual-time-budget={budget_ms}", "--dump-dom", url],
                         capture_output=True, text=True, timeout=timeout_s, check=True)
    return out.stdout


def playwright_browser():  # noqa: ANN201 - playwright's Browser, imported lazily
    """A started (Playwright, Browser) pair on the system Chromium; the caller closes both."""
    path = chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed (pip install -c constraints.txt -e '.[dev]')")
    pw = sync_playwright().start()
    try:
        return pw, pw.chromium.launch(executable_path=path, args=BASE_ARGS[1:], timeout=60_000)
    except Exception:
        pw.stop()
        raise

"""A database password never reaches a terminal or a log: every error path that shows a database URL
masks it (``postgresql://admin:***@host/db``), on ``serve`` and ``worker``, and so does the running
service's start-up line and log."""

from __future__ import annotations

import subprocess
import sys

import pytest
from api_servers import Server

SECRET = "Sup3rSecretPw"


@pytest.mark.parametrize("args", [
    ["serve", "--db", f"postgres://admin:{SECRET}@127.0.0.1:1/db"],  # a scheme SQLAlchemy does not know
    ["serve", "--db", f"mysql://admin:{SECRET}@127.0.0.1/db"],  # a driver that is not installed
    ["serve", "--db", f"oracle://admin:{SECRET}@127.0.0.1/db"],
    ["serve", "--db", f"postgresql://admin:{SECRET}@127.0.0.1:1/db"],  # nothing listens there
    ["serve", "--db", f"postgresql://admin:{SECRET}@127.0.0.1:notaport/db"],  # unparsable
    ["serve", "--db", f"mysql://admin:{SECRET}@127.0.0.1/db", "--workers", "external"],
    ["worker", "--db", f"mysql://admin:{SECRET}@127.0.0.1/db"],
    ["worker", "--db", f"postgresql://admin:{SECRET}@127.0.0.1:1/db"],
], ids=["serve-unknown-scheme", "serve-no-driver", "serve-oracle", "serve-unreachable", "serve-unparsable",
        "serve-external-not-postgresql", "worker-not-postgresql", "worker-unreachable"])
def test_an_error_naming_the_database_masks_its_password(args: list[str]) -> None:
    out = subprocess.run([sys.executable, "-m", "pipesched", *args, "--port", "0"] if args[0] == "serve"
                         else [sys.executable, "-m", "pipesched", *args],
                         capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    assert out.returncode == 2, text
    assert text.startswith("pipesched: error: ") and len(text.strip().splitlines()) == 1, text
    assert SECRET not in text and "admin:***@" in text, text


def test_a_running_service_masks_the_password_in_its_start_up_line_and_log(make_server, postgres_url: str,
                                                                          pg_prefix: str) -> None:  # noqa: ANN001
    # the test server trusts loopback connections, so a password in the URL is accepted and ignored
    scheme, rest = postgres_url.split("://", 1)
    user, host = rest.split("@", 1)
    server: Server = make_server(f"{scheme}://{user}:{SECRET}@{host}", env={"PIPESCHED_TABLE_PREFIX": pg_prefix})
    server.start()
    assert server.post({"problem": {"devices": 2, "microbatches": 3}, "method": "gpipe"}).status_code == 200
    server.stop()
    log = server.log.read_text()
    assert "pipesched: serving on" in log and f"{user}:***@" in log, log
    assert SECRET not in log, log

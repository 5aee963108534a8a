"""``pipesched serve`` start-up: bad flags create nothing, "serving on" only once bound, ``--port 0``
reports the real port, a missing PostgreSQL driver names the extra to install."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx


def serve(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return subprocess.Popen([sys.executable, "-m", "pipesched", "serve", *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            env={**os.environ, "HOME": str(home), **(env or {})})


def finished(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def test_an_impossible_port_is_one_line_and_creates_no_cache(tmp_path: Path) -> None:
    code, out, err = finished(serve(tmp_path, "--port", "99999"))
    assert code == 2 and err == "pipesched: error: serve: argument --port: must be from 0 to 65535 (got 99999) " \
                                "(see pipesched serve --help)\n", err
    assert not list((tmp_path / "home").rglob("*"))  # the default cache database was not created


def test_a_port_in_use_says_so_without_claiming_to_serve_and_creates_no_cache(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        db = tmp_path / "cache.db"
        code, out, err = finished(serve(tmp_path, "--port", str(port), "--db", f"sqlite:///{db}"))
    assert code == 2 and "serving" not in out + err, out + err
    assert err.startswith(f"pipesched: error: cannot listen on 127.0.0.1:{port}: ") and err.count("\n") == 1, err
    assert not db.exists()


def test_port_0_reports_the_bound_port_once_it_serves(tmp_path: Path) -> None:
    proc = serve(tmp_path, "--port", "0", "--db", f"sqlite:///{tmp_path / 'cache.db'}")
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("pipesched: serving on http://127.0.0.1:"), line + (proc.stderr.read() if proc.poll() else "")
        port = int(line.split("http://127.0.0.1:")[1].split()[0])
        assert port != 0
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=30).status_code == 200
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=60)


def test_a_postgresql_url_without_its_driver_names_the_extra(tmp_path: Path) -> None:
    missing = tmp_path / "no_driver"  # this interpreter's psycopg, as if it were not installed
    missing.mkdir()
    (missing / "psycopg.py").write_text("raise ModuleNotFoundError(\"No module named 'psycopg'\", name='psycopg')\n")
    code, out, err = finished(serve(tmp_path, "--port", "0", "--db", "postgresql://postgres@127.0.0.1:5432/test",
                                    env={"PYTHONPATH": str(missing)}))
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "driver 'psycopg' is not installed; pip install 'pipesched[postgres]'" in err, err

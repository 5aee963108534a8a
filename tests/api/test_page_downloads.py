"""What the page offers without a browser: the schedule file route, and a page that needs no other host."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from api_servers import SMALL, Server

from pipesched.solver import Schedule


def test_the_schedule_file_is_the_solved_schedule_and_the_cli_reads_it(server: Server, tmp_path: Path) -> None:
    answer = server.post({"problem": SMALL, "method": "1f1b", "wait_s": 60})
    assert answer.status_code == 200
    key, solved = answer.json()["key"], Schedule.model_validate(answer.json()["schedule"])
    response = server.get(f"/v1/schedules/{key}/schedule.json", params={"method": "1f1b"})
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    assert 'filename="schedule-1f1b.json"' in response.headers["content-disposition"]
    served = Schedule.model_validate_json(response.text)
    assert served.ops == solved.ops and served.method == "1f1b"
    path = tmp_path / "schedule.json"
    path.write_bytes(response.content)
    render = subprocess.run([sys.executable, "-m", "pipesched", "render", str(path), "-o", str(tmp_path / "g.svg")],
                            capture_output=True, text=True, timeout=120)
    assert render.returncode == 0, render.stderr
    assert (tmp_path / "g.svg").read_text().count('class="device"') == SMALL["devices"]


def test_an_unknown_schedule_file_is_a_404_naming_the_key(server: Server) -> None:
    key = "0" * 64
    response = server.get(f"/v1/schedules/{key}/schedule.json", params={"method": "auto"})
    assert response.status_code == 404 and key in response.json()["detail"]


def test_the_page_names_no_other_host(server: Server) -> None:
    page = server.get("/")
    assert page.status_code == 200
    assert re.findall(r"(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}", page.text, re.IGNORECASE) == []
    for asset in re.findall(r"""(?:src|href)="(/[^"]*)\"""", page.text):
        assert server.get(asset).status_code == 200, asset

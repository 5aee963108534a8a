"""``pipesched batch`` resumes by (problem, method) and budget, ``--force`` re-solves, and an error
every problem would hit (unknown method, refused token) stops the sweep at the first problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from api_servers import Server

from pipesched.cli import main
from pipesched.solver import Schedule


def sweep(tmp_path: Path, n: int = 3) -> Path:
    path = tmp_path / "sweep.jsonl"
    path.write_text("".join(json.dumps({"name": f"p{i}", "problem": {"devices": 2, "microbatches": 3 + i}}) + "\n"
                            for i in range(n)))
    return path


def batch(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["batch", *args])
    return code, capsys.readouterr().err


def test_another_method_is_solved_again_and_force_solves_everything(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    src, out = sweep(tmp_path), str(tmp_path / "out")
    assert batch(capsys, str(src), "-o", out, "--method", "gpipe", "--time-limit", "2")[0] == 0
    code, err = batch(capsys, str(src), "-o", out, "--method", "1f1b", "--time-limit", "2")
    assert code == 0 and "3 to solve, 0 already in" in err
    assert {Schedule.model_validate_json((tmp_path / "out" / f"p{i}.json").read_text()).method
            for i in range(3)} == {"1f1b"}
    assert "0 to solve, 3 already in" in batch(capsys, str(src), "-o", out, "--method", "1f1b", "--time-limit", "2")[1]
    assert "3 to solve, 0 already in" in batch(capsys, str(src), "-o", out, "--method", "1f1b", "--time-limit", "2",
                                               "--force")[1]


def test_a_larger_time_limit_solves_unproven_answers_again(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    src, out = sweep(tmp_path), tmp_path / "out"
    assert batch(capsys, str(src), "-o", str(out), "--method", "gpipe", "--time-limit", "1")[0] == 0
    statuses = [Schedule.model_validate_json((out / f"p{i}.json").read_text()).status for i in range(3)]
    unproven = sum(s not in ("optimal", "infeasible") for s in statuses)
    assert unproven > 0  # gpipe's answers here are not proven optimal
    code, err = batch(capsys, str(src), "-o", str(out), "--method", "gpipe", "--time-limit", "3")
    assert code == 0 and f"{unproven} to solve" in err and f"{unproven} of those again" in err
    assert "0 to solve" in batch(capsys, str(src), "-o", str(out), "--method", "gpipe", "--time-limit", "3")[1]
    assert "0 to solve" in batch(capsys, str(src), "-o", str(out), "--method", "gpipe", "--time-limit", "2")[1]


def test_an_unknown_method_stops_at_the_first_problem(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    code, err = batch(capsys, str(sweep(tmp_path, 6)), "-o", str(tmp_path / "out"), "--method", "nope", "--jobs", "1")
    assert code == 2
    assert err.count("unknown method 'nope'") == 1 and err.count("pipesched: error:") == 1, err
    assert not list((tmp_path / "out").glob("p*.json"))


def test_a_refused_token_stops_at_the_first_problem(make_server, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    server: Server = make_server(token="right").start()
    code, err = batch(capsys, str(sweep(tmp_path, 6)), "-o", str(tmp_path / "out"), "--server", server.url,
                      "--token", "wrong", "--method", "gpipe", "--jobs", "1")
    assert code == 2 and err.count("HTTP 401") == 1 and err.count("pipesched: error:") == 1, err


def test_an_unreachable_server_stops_at_the_first_problem(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    from api_servers import free_port

    code, err = batch(capsys, str(sweep(tmp_path, 4)), "-o", str(tmp_path / "out"), "--server",
                      f"http://127.0.0.1:{free_port()}", "--method", "gpipe", "--jobs", "1")
    assert code == 2 and err.count("cannot reach") == 1 and err.count("pipesched: error:") == 1, err

"""pipesched.client against a real server: answers, jobs, errors, fallback and the local cache."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from api_servers import SMALL, Server, free_port

from pipesched.client import Client, JobPending, ServiceError, ServiceUnavailable
from pipesched.solver import Problem, Schedule, validate


def test_the_client_returns_the_schedule_for_a_dict_or_a_model(server: Server, tmp_path: Path) -> None:
    with Client(server.url, cache_dir=tmp_path) as client:
        from_dict = client.solve({"devices": 2, "microbatches": 5}, method="gpipe")
        from_model = client.solve(Problem(devices=2, microbatches=5), method="gpipe")
    assert isinstance(from_dict, Schedule) and validate(from_dict) == []
    assert from_model.ops == from_dict.ops


def test_the_client_follows_a_202_job_to_completion_or_hands_it_back(server: Server) -> None:
    with Client(server.url, cache_dir=False, poll_s=0.05) as client:
        schedule = client.solve({"devices": 3, "microbatches": 9}, method="gpipe", wait_s=0)
        assert schedule.problem.microbatches == 9 and validate(schedule) == []
        with pytest.raises(JobPending) as pending:
            client.solve({"devices": 3, "microbatches": 10}, method="gpipe", wait_s=0, wait=False)
        assert client.job(pending.value.job)["key"] == pending.value.key


def test_the_client_reports_a_refused_problem_naming_the_field(server: Server) -> None:
    with Client(server.url, cache_dir=False) as client, pytest.raises(ServiceError, match="unknown method 'magic'"):
        client.solve(SMALL, method="magic")


def test_an_unreachable_service_falls_back_to_a_local_solve_with_a_warning(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    fallback = Client(url, fallback="local", cache_dir=tmp_path, retries=2, backoff_s=0.01)
    with fallback, pytest.warns(RuntimeWarning, match="unreachable; solving 'gpipe' on this machine"):
        schedule = fallback.solve(SMALL, method="gpipe")
    assert validate(schedule) == [] and schedule.method == "gpipe"
    with Client(url, cache_dir=False, retries=2, backoff_s=0.01) as strict, pytest.raises(ServiceUnavailable):
        strict.solve(SMALL, method="gpipe")


def test_a_restarted_trainer_is_answered_from_the_local_cache_without_the_service(make_server, tmp_path: Path) -> None:  # noqa: ANN001
    server = make_server().start()
    with Client(server.url, cache_dir=tmp_path / "cache") as trainer:
        first = trainer.solve(SMALL, method="gpipe", time_limit_s=2)
    server.stop()  # the service is gone; a new process with the same cache does not need it
    with Client(server.url, cache_dir=tmp_path / "cache", retries=1) as restarted, warnings.catch_warnings():
        warnings.simplefilter("error")  # and no fallback warning either
        again = restarted.solve(dict(SMALL), method="gpipe", time_limit_s=1)
        assert again == first
        with pytest.raises(ServiceUnavailable):  # a bigger budget than cached does ask the service
            restarted.solve(SMALL, method="gpipe", time_limit_s=5)

"""The scale-out mode end to end: two ``pipesched serve --workers external`` replicas and
``pipesched worker`` processes on one fresh PostgreSQL database, all real, all on loopback.

Jobs are queued before any worker runs wherever the order matters, so nothing depends on timing.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from pathlib import Path

import httpx
from scaleout_parts import Proc, Replica, admin_sql, descendants, nice_of, start_worker

from pipesched.solver import Problem, Schedule, validate


def problem(microbatches: int, hard: bool = False) -> dict:
    """A small problem per test (distinct microbatches: distinct cache keys); ``hard`` ones keep
    CP-SAT busy for its whole time limit (non-uniform v = 2 stages under a memory cap)."""
    if not hard:
        return {"devices": 2, "microbatches": microbatches}
    return {
        "devices": 4, "microbatches": microbatches, "stages_per_device": 2, "placement": "loop",
        "costs": {"forward": [1.0, 1.3, 0.9, 1.1, 1.2, 0.8, 1.05, 1.15],
                  "backward_input": [1.1, 1.0, 1.2, 0.9, 1.3, 1.0, 1.1, 0.95],
                  "backward_weight": [0.7, 0.9, 0.8, 1.0, 0.6, 0.85, 0.75, 0.9], "comm": 0.1},
        "memory": {"forward": 1.0, "backward_input": 0.0, "backward_weight": -1.0, "limit": 5},
        "objective": "stage_span",
    }


def job_row(db: str, job_id: str) -> tuple:
    rows = admin_sql(db, f"SELECT state, attempts, worker, error FROM jobs WHERE id = '{job_id}'")
    assert rows, f"no job row {job_id}"
    return rows[0]


def wait_for(check, timeout_s: float = 120, what: str = "condition"):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} not reached in {timeout_s} s")


def assert_valid(body: dict, p: dict) -> None:
    schedule = Schedule.model_validate(body["schedule"])
    assert schedule.problem == Problem.model_validate(p)
    assert validate(schedule) == []


def test_identical_requests_on_two_replicas_share_one_job_any_replica_reports_it(
        replicas: tuple[Replica, Replica], workers: list[Proc], pg_db: str, tmp_path: Path) -> None:
    a, b = replicas
    body = {"problem": problem(6), "method": "1f1b", "wait_s": 0}
    first, second = a.post(body), b.post(body)
    assert first.status_code == second.status_code == 202, (first.text, second.text)
    assert first.json()["job"] == second.json()["job"]  # deduplicated across replicas
    job_id = first.json()["job"]
    assert b.job(job_id)["state"] == "queued"  # B reports A's job although no worker runs yet
    workers += [start_worker(pg_db, tmp_path / "w1.log"), start_worker(pg_db, tmp_path / "w2.log")]
    done = b.wait_job(job_id)
    assert done["state"] == "done", done
    assert_valid(done["result"], body["problem"])
    again = a.post({**body, "wait_s": 30})  # the schedule is in the shared cache now
    assert again.status_code == 200 and again.json()["cached"] is True


def test_interactive_requests_run_before_batch_submissions(
        replicas: tuple[Replica, Replica], workers: list[Proc], pg_db: str, tmp_path: Path) -> None:
    a, b = replicas
    batch = [a.post({"problem": problem(m), "method": "gpipe", "wait_s": 0},
                    headers={"X-Pipesched-Priority": "batch"}).json()["job"] for m in (7, 9, 11)]
    interactive = b.post({"problem": problem(13), "method": "gpipe", "wait_s": 0}).json()["job"]
    workers.append(start_worker(pg_db, tmp_path / "w.log"))  # one worker, one solve at a time
    finished = {j: a.wait_job(j)["finished_at"] for j in [*batch, interactive]}
    assert finished[interactive] < min(finished[j] for j in batch), finished


def test_a_job_whose_worker_is_killed_is_finished_by_another_worker(
        replicas: tuple[Replica, Replica], workers: list[Proc], pg_db: str, tmp_path: Path) -> None:
    a, b = replicas
    body = {"problem": problem(12, hard=True), "method": "cpsat", "time_limit_s": 4, "wait_s": 0}
    job_id = a.post(body).json()["job"]
    first = start_worker(pg_db, tmp_path / "w1.log")
    workers.append(first)
    wait_for(lambda: job_row(pg_db, job_id)[0] == "running", what="the first worker runs the job")
    first_pid = first.pid()
    # The solve runs at the default --nice idle; the worker's loop (heartbeats) stays at normal priority.
    solving = wait_for(lambda: [p for p in descendants(first_pid) if _policy(p) == os.SCHED_IDLE],
                       what="a solve process in SCHED_IDLE")
    assert solving and _nice(first_pid) == 0 and _policy(first_pid) == os.SCHED_OTHER
    first.kill9()  # mid-solve
    workers.append(start_worker(pg_db, tmp_path / "w2.log"))
    done = b.wait_job(job_id)
    state, attempts, worker, _ = job_row(pg_db, job_id)
    assert (done["state"], state, attempts) == ("done", "done", 2), done
    assert not worker.endswith(f":{first_pid}")
    assert_valid(done["result"], body["problem"])


def test_a_job_that_keeps_killing_its_workers_fails_with_the_reason(
        replicas: tuple[Replica, Replica], workers: list[Proc], pg_db: str, tmp_path: Path) -> None:
    a, _ = replicas
    job_id = a.post({"problem": problem(14, hard=True), "method": "cpsat", "time_limit_s": 4,
                     "wait_s": 0}).json()["job"]
    first = start_worker(pg_db, tmp_path / "w1.log", "--max-attempts", "1")
    workers.append(first)
    wait_for(lambda: job_row(pg_db, job_id)[0] == "running", what="the first worker runs the job")
    first.kill9()
    workers.append(start_worker(pg_db, tmp_path / "w2.log", "--max-attempts", "1"))
    failed = a.wait_job(job_id)
    assert failed["state"] == "failed" and "gave up after 1 attempts" in failed["error"], failed


def test_a_replica_killed_while_a_request_waits_loses_nothing(
        replicas: tuple[Replica, Replica], workers: list[Proc], pg_db: str, tmp_path: Path) -> None:
    _, b = replicas
    doomed = Replica(pg_db, tmp_path / "doomed.log")
    try:
        body = {"problem": problem(15), "method": "zb-h1", "wait_s": 60}
        waiting = threading.Thread(target=lambda: _swallow(lambda: doomed.post(body)), daemon=True)
        waiting.start()
        wait_for(lambda: admin_sql(pg_db, "SELECT count(*) FROM jobs WHERE method = 'zb-h1'")[0][0] == 1,
                 what="the request's job is queued")
        doomed.kill9()
        waiting.join(30)
    finally:
        doomed.stop()
    workers.append(start_worker(pg_db, tmp_path / "w.log"))
    wait_for(lambda: admin_sql(pg_db, "SELECT state FROM jobs WHERE method = 'zb-h1'")[0][0] == "done",
             what="the job completes without its replica")
    served = b.post(body)
    assert served.status_code == 200 and served.json()["cached"] is True
    assert_valid(served.json(), body["problem"])


def test_replicas_and_workers_reconnect_after_their_connections_are_terminated(
        replicas: tuple[Replica, Replica], workers: list[Proc], pg_db: str, tmp_path: Path) -> None:
    a, b = replicas
    workers.append(start_worker(pg_db, tmp_path / "w.log"))
    warm = a.post({"problem": problem(16), "method": "1f1b", "wait_s": 60})
    assert warm.status_code == 200
    name = pg_db.rsplit("/", 1)[1]
    admin = pg_db.rsplit("/", 1)[0] + "/postgres"
    killed = admin_sql(admin, f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              f"WHERE datname = '{name}' AND pid <> pg_backend_pid()")
    assert len(killed) >= 2  # the replicas' and the worker's connections
    body = {"problem": problem(17), "method": "1f1b", "wait_s": 60}
    after = b.post(body)
    assert after.status_code == 200 and after.json()["cached"] is False, after.text
    assert_valid(after.json(), body["problem"])
    assert warm.json()["key"] != after.json()["key"]


def _swallow(fn) -> None:  # noqa: ANN001
    with contextlib.suppress(Exception):  # the replica was killed under the request: expected
        fn()


def test_a_batch_sweep_through_the_service_queues_behind_a_later_interactive_request(
        replicas: tuple[Replica, Replica], workers: list[Proc], pg_db: str, tmp_path: Path) -> None:
    from pipesched.api.scaleout.queue import PRIORITY_BATCH, PRIORITY_INTERACTIVE

    a, b = replicas
    sweep = tmp_path / "sweep.jsonl"
    sweep.write_text("".join(json.dumps({"name": f"s{m}", "problem": problem(m)}) + "\n" for m in (20, 21, 22)))
    batch = Proc(["batch", str(sweep), "-o", str(tmp_path / "out"), "--server", a.url, "--method", "gpipe",
                  "--jobs", "3", "--time-limit", "5"], tmp_path / "batch.log", lifetime_s=300)
    try:
        queued = wait_for(lambda: _queued_priorities(pg_db) if len(_queued_priorities(pg_db)) == 3 else None,
                          what="the sweep's three solves are queued")
        assert set(queued.values()) == {PRIORITY_BATCH}, queued  # `batch --server` marked them as batch
        interactive = b.post({"problem": problem(23), "method": "gpipe", "wait_s": 0}).json()["job"]
        assert _queued_priorities(pg_db)[interactive] == PRIORITY_INTERACTIVE
        workers.append(start_worker(pg_db, tmp_path / "w.log"))  # one worker, one solve at a time
        assert batch.proc.wait(240) == 0, batch.log.read_text()[-2000:]
    finally:
        batch.stop()
    finished = {job_id: a.job(job_id)["finished_at"] for job_id in [*queued, interactive]}
    assert finished[interactive] < min(finished[j] for j in queued), finished


def test_finished_jobs_are_pruned_after_the_retention_and_their_schedules_stay_in_the_cache(
        replicas: tuple[Replica, Replica], workers: list[Proc], pg_db: str, tmp_path: Path) -> None:
    a, b = replicas
    first = start_worker(pg_db, tmp_path / "w1.log")
    workers.append(first)
    body = {"problem": problem(24), "method": "1f1b", "wait_s": 60}
    solved = a.post(body)
    assert solved.status_code == 200
    first.stop()
    old = admin_sql(pg_db, f"SELECT id FROM jobs WHERE key = '{solved.json()['key']}'")[0][0]
    waiting = a.post({"problem": problem(25), "method": "1f1b", "wait_s": 0}).json()["job"]  # no worker: stays queued
    long_ago = time.time() - 3600
    admin_sql(pg_db, f"UPDATE jobs SET finished_at = {long_ago}, created_at = {long_ago} WHERE id = '{old}'")
    admin_sql(pg_db, f"UPDATE jobs SET created_at = {long_ago} WHERE id = '{waiting}'")
    workers.append(start_worker(pg_db, tmp_path / "w2.log", "--retention", "600"))  # prunes on start
    wait_for(lambda: not admin_sql(pg_db, f"SELECT 1 FROM jobs WHERE id = '{old}'"), what="the old job is pruned")
    gone = httpx.get(f"{b.url}/v1/jobs/{old}", timeout=30)
    assert gone.status_code == 404 and "job_retention_s" in gone.json()["detail"], gone.text
    assert b.job(waiting)["state"] in ("queued", "running", "done")  # the queued job was not touched
    again = b.post(body)
    assert again.status_code == 200 and again.json()["cached"] is True


def _policy(pid: int) -> int | None:
    try:
        return os.sched_getscheduler(pid)
    except OSError:  # gone meanwhile
        return None


def _nice(pid: int) -> int | None:
    try:
        return nice_of(pid)
    except OSError:  # gone meanwhile
        return None


def _queued_priorities(db: str) -> dict[str, int]:
    return {str(i): p for i, p in admin_sql(db, "SELECT id, priority FROM pgqueuer WHERE status = 'queued'")}

"""The store on SQLite and PostgreSQL: best-schedule-wins upserts, and kill -9 never half-writes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from pipesched.api.store import Store


def put(store: Store, key: str, status: str, objective: float | None, budget: float = 1.0, text: str = "{}"):  # noqa: ANN201
    return store.put(key=key, method="auto", status=status, objective_value=objective, lower_bound=1.0,
                     budget_s=budget, solve_time_s=0.5, schedule_json=text)


def test_a_worse_schedule_never_replaces_a_better_one(store_url: tuple[str, str]) -> None:
    store = Store(*store_url)
    put(store, "k", "feasible", 10.0, text="first")
    kept = put(store, "k", "feasible", 12.0, budget=5.0, text="worse")
    assert (kept.schedule_json, kept.objective_value) == ("first", 10.0)
    assert kept.budget_s == 5.0 and kept.solve_time_s == 1.0  # the time spent is still recorded
    better = put(store, "k", "feasible", 9.0, text="better")
    assert (better.schedule_json, better.budget_s) == ("better", 5.0)
    store.close()


def test_a_proven_optimal_entry_is_final(store_url: tuple[str, str]) -> None:
    store = Store(*store_url)
    put(store, "k", "feasible", 10.0, text="feasible")
    proven = put(store, "k", "optimal", 10.0, text="optimal")
    assert proven.status == "optimal" and proven.final
    after = put(store, "k", "feasible", 1.0, text="bogus")  # cannot beat a proof: kept as is
    assert after.schedule_json == "optimal"
    store.close()


def test_a_timeout_without_schedule_is_replaced_by_any_schedule(store_url: tuple[str, str]) -> None:
    store = Store(*store_url)
    put(store, "k", "timeout", None, text="nothing")
    assert put(store, "k", "timeout", None, budget=3.0, text="still nothing").schedule_json == "nothing"
    assert put(store, "k", "feasible", 20.0, text="found").schedule_json == "found"
    assert store.best("k").schedule_json == "found"
    assert store.get("k", "gpipe") is None and store.get("missing", "auto") is None
    store.close()


def test_best_prefers_proven_optimal_then_lowest_objective_over_methods(store_url: tuple[str, str]) -> None:
    store = Store(*store_url)
    store.put(key="k", method="gpipe", status="feasible", objective_value=14.0, lower_bound=1, budget_s=1,
              solve_time_s=0, schedule_json="gpipe")
    store.put(key="k", method="1f1b", status="feasible", objective_value=11.0, lower_bound=1, budget_s=1,
              solve_time_s=0, schedule_json="1f1b")
    assert store.best("k").method == "1f1b"
    store.put(key="k", method="cpsat", status="optimal", objective_value=11.0, lower_bound=11, budget_s=1,
              solve_time_s=0, schedule_json="cpsat")
    assert store.best("k").method == "cpsat"
    assert store.count() == 3
    store.close()


WRITER = """
import json, sys
from pipesched.api.store import Store
store = Store(sys.argv[1], sys.argv[2])
pad = "x" * 200_000
for i in range(100_000):
    text = json.dumps({"n": i, "pad": pad})
    store.put(key=f"k{i % 50}", method="auto", status="feasible", objective_value=1e6 - i, lower_bound=0.0,
              budget_s=1.0, solve_time_s=0.0, schedule_json=text)
    print(i, flush=True)
"""


def test_kill_9_during_writes_leaves_every_committed_entry_whole(store_url: tuple[str, str]) -> None:
    url, prefix = store_url
    Store(url, prefix).close()  # create the table before the race
    writer = subprocess.Popen([sys.executable, "-c", WRITER, url, prefix], stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None
    committed = -1
    deadline = time.monotonic() + 30
    while committed < 60 and time.monotonic() < deadline:  # past the first 50 inserts: updates too
        committed = int(writer.stdout.readline())
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    store = Store(url, prefix)
    assert store.count() == 50
    for i in range(50):
        entry = store.get(f"k{i}", "auto")
        data = json.loads(entry.schedule_json)  # whole: parses, full padding, consistent with its row
        assert len(data["pad"]) == 200_000
        assert entry.objective_value == 1e6 - data["n"]
    newest = max(json.loads(store.get(f"k{i}", "auto").schedule_json)["n"] for i in range(50))
    assert newest >= committed  # nothing the writer saw committed was lost
    store.close()


def test_stores_opened_at_the_same_instant_on_an_empty_postgresql_database_all_open(
        postgres_url: str, pg_prefix: str) -> None:
    """Table creation is serialised (an advisory lock): six starters at once, none loses the race
    (without the lock 8 of 10 such rounds lost one to DuplicateTable or a pg_type unique violation)."""
    import threading

    for attempt in range(3):
        prefix = f"{pg_prefix}{attempt}_"
        barrier, errors = threading.Barrier(6), []

        def open_store(prefix: str = prefix, barrier: threading.Barrier = barrier, errors: list = errors) -> None:
            barrier.wait()
            try:
                Store(postgres_url, prefix).close()
            except Exception as e:
                errors.append(f"{type(e).__name__}: {e}")

        threads = [threading.Thread(target=open_store) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        Store(postgres_url, prefix).drop()
        assert errors == [], errors

"""The scale-out mode's wake-ups and retention against the real PostgreSQL (in-process parts):
a NOTIFY wakes exactly its watchers; pruning deletes only finished records older than the retention.

Every test takes ``pg_db``, which requires pgqueuer through the scale-out require rule (skip locally
without it, fail under ``PIPESCHED_REQUIRE_SCALEOUT=1``); the queue module, which imports pgqueuer,
is imported inside the tests that use it."""

from __future__ import annotations

import asyncio
import time

import psycopg
from scaleout_parts import admin_sql

from pipesched.api.scaleout.jobtable import JobTable
from pipesched.api.scaleout.wakeups import Listener, done_channel
from pipesched.api.store import Store

DAY = 86400.0


def _url(url: str) -> str:
    """The plain ``postgresql://`` URL libpq reads (as the queue module's ``libpq_url``)."""
    from pipesched.api.scaleout.queue import libpq_url

    return libpq_url(url)


def test_a_notification_wakes_the_watchers_of_its_job_and_no_other(pg_db: str) -> None:
    async def scenario() -> tuple[bool, bool, bool]:
        channel = done_channel("wake_")
        listener = Listener(_url(pg_db), [channel])
        await listener.start()
        try:
            await asyncio.wait_for(listener.connected.wait(), 30)
            with listener.watch(channel, "7") as seven, listener.watch(channel, "8") as eight, \
                    listener.watch(channel) as anything:
                for event in (seven, eight, anything):
                    event.clear()  # the wake-all on connecting
                with listener.watch(channel, "end") as end:
                    async with await psycopg.AsyncConnection.connect(_url(pg_db), autocommit=True) as conn:
                        await conn.execute("SELECT pg_notify(%s, '7')", (channel,))
                        await conn.execute("SELECT pg_notify(%s, 'end')", (channel,))
                    # one connection delivers in order: once 'end' is dispatched, so was '7'
                    await asyncio.wait_for(end.wait(), 30)  # fails the test if notifications do not arrive
                return seven.is_set(), eight.is_set(), anything.is_set()
        finally:
            await listener.close()

    assert asyncio.run(scenario()) == (True, False, True)


def test_a_listener_whose_connection_is_terminated_reconnects_and_wakes_everyone_to_re_read(pg_db: str) -> None:
    async def scenario() -> bool:
        channel = done_channel("drop_")
        listener = Listener(_url(pg_db), [channel], retry_max_s=0.2)
        await listener.start()
        try:
            await asyncio.wait_for(listener.connected.wait(), 30)
            with listener.watch(channel, "1") as waiter:
                waiter.clear()
                await asyncio.to_thread(admin_sql, pg_db, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                        "WHERE application_name = 'pipesched-listen' AND pid <> pg_backend_pid()")
                await asyncio.wait_for(waiter.wait(), 30)  # woken to re-read what it may have missed
                await asyncio.wait_for(listener.connected.wait(), 30)
                waiter.clear()
                async with await psycopg.AsyncConnection.connect(_url(pg_db), autocommit=True) as conn:
                    await conn.execute("SELECT pg_notify(%s, '1')", (channel,))
                await asyncio.wait_for(waiter.wait(), 30)  # and listening again
                return True
        finally:
            await listener.close()

    assert asyncio.run(scenario())


def test_pruning_deletes_only_finished_job_records_older_than_the_retention(pg_db: str) -> None:
    store = Store(pg_db, "prune_")
    table = JobTable(store.engine, "prune_")
    try:
        for job_id, state in [("old-done", "done"), ("old-failed", "failed"), ("new-done", "done"),
                              ("old-queued", "queued"), ("old-running", "running")]:
            table.record(job_id, "k" + job_id, "1f1b", 10.0, "{}")
            if state in ("done", "failed"):
                table.finish(job_id, state, "ok", None)
            elif state == "running":
                table.start(job_id, "k" + job_id, "1f1b", 10.0, "{}", "w")
        two_days_ago = time.time() - 2 * DAY
        admin_sql(pg_db, f"UPDATE prune_jobs SET created_at = {two_days_ago}, "  # noqa: S608
                         f"finished_at = CASE WHEN finished_at IS NULL THEN NULL ELSE {two_days_ago} END "
                         "WHERE id LIKE 'old-%'")
        assert table.prune(DAY) == 2
        left = sorted(r[0] for r in admin_sql(pg_db, "SELECT id FROM prune_jobs"))
        assert left == ["new-done", "old-queued", "old-running"]
        assert table.prune(DAY) == 0
    finally:
        table.drop()
        store.close()


def test_pruning_the_queue_log_keeps_the_recent_rows(pg_db: str) -> None:
    from pipesched.api.scaleout.queue import JobQueue

    async def scenario() -> tuple[int, int]:
        queue = JobQueue(pg_db, "plog_")
        await queue.install()
        try:
            for n in range(3):
                await queue.enqueue(b"{}", 0, f"d{n}")
            admin_sql(pg_db, "UPDATE plog_pgqueuer_log SET created = created - interval '2 days' "
                             "WHERE id IN (SELECT id FROM plog_pgqueuer_log ORDER BY id LIMIT 2)")
            pruned = await queue.prune_log(DAY)
            return pruned, admin_sql(pg_db, "SELECT count(*) FROM plog_pgqueuer_log")[0][0]
        finally:
            await queue.uninstall()
            await queue.close()

    assert asyncio.run(scenario()) == (2, 1)

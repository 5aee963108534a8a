"""Wake-ups through PostgreSQL ``LISTEN/NOTIFY``, so neither workers nor waiting requests poll.

Two channels:

- pgqueuer's own (``{prefix}ch_pgqueuer``): its trigger notifies on every change of the queue
  table (a job queued, its priority raised, claimed, finished), which wakes idle workers;
- ours (``{prefix}pipesched_done``, payload the job id): the worker that finishes a job sends it,
  which wakes exactly the requests waiting on that job, on every replica.

A notification sent while the listening connection is down is lost, so after every (re)connect
all watchers are woken to re-read the tables, and watchers also re-check on a slow timer (a safety
net measured in seconds, not the mechanism).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator

import psycopg
from psycopg import sql

log = logging.getLogger("pipesched.scaleout")

#: Payload-less watchers of a channel are woken by any notification on it.
ANY = None


def done_channel(table_prefix: str) -> str:
    return f"{table_prefix}pipesched_done"


class Listener:
    """One ``LISTEN`` connection (reconnecting) that sets the :class:`asyncio.Event` of its watchers."""

    def __init__(self, url: str, channels: list[str], retry_max_s: float = 2.0) -> None:
        self.url, self.channels, self.retry_max_s = url, channels, retry_max_s
        self._watchers: dict[tuple[str, str | None], set[asyncio.Event]] = {}
        self._task: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="pipesched-listener")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    @contextlib.contextmanager
    def watch(self, channel: str, payload: str | None = ANY) -> Iterator[asyncio.Event]:
        """An event set on each notification on ``channel`` (with ``payload``, unless ANY).

        Clear it *before* re-reading the state it stands for, then wait on it: a notification
        between the read and the wait still wakes the waiter.
        """
        event = asyncio.Event()
        watchers = self._watchers.setdefault((channel, payload), set())
        watchers.add(event)
        try:
            yield event
        finally:
            watchers.discard(event)
            if not watchers:
                self._watchers.pop((channel, payload), None)

    def _wake_all(self) -> None:
        for events in self._watchers.values():
            for event in events:
                event.set()

    def _dispatch(self, channel: str, payload: str) -> None:
        for key in ((channel, ANY), (channel, payload)):
            for event in self._watchers.get(key, ()):
                event.set()

    async def _run(self) -> None:
        delay = 0.1
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                        self.url, autocommit=True, application_name="pipesched-listen") as conn:
                    for channel in self.channels:
                        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                    self.connected.set()
                    delay = 0.1
                    self._wake_all()  # whatever was missed while disconnected: re-read
                    async for note in conn.notifies():
                        self._dispatch(note.channel, note.payload)
            except (psycopg.OperationalError, psycopg.InterfaceError) as e:
                log.warning("listen connection lost (%s); reconnecting in %.1f s", str(e).strip(), delay)
            self.connected.clear()
            self._wake_all()
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.retry_max_s)


async def wait_woken(event: asyncio.Event, timeout_s: float, *others: asyncio.Event) -> None:
    """Wait until ``event`` (or any of ``others``) is set, at most ``timeout_s``."""
    waits = [asyncio.ensure_future(e.wait()) for e in (event, *others)]
    try:
        await asyncio.wait(waits, timeout=max(0.0, timeout_s), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()

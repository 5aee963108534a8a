"""``pipesched worker``: claim solves from the shared queue and run each in its own killable process.

The solve itself is exactly the service's (:class:`pipesched.api.solving.runner.ProcessRunner`:
a process forked from a warm forkserver, killed at ``time_limit_s + kill_grace_s``), so a worker
on another host has the same hard limits and isolation as a local replica.

Faults. While a solve runs the worker refreshes its job's heartbeat every
``heartbeat_timeout_s / 3``; a worker killed with SIGKILL stops beating (its solver process
exits with it: :func:`pipesched.api.solving.worker.watch_spawner`), and after
``heartbeat_timeout_s`` any other worker's claim picks the job up again. Each attempt is counted
in the job table; the one after ``max_attempts`` marks the job ``failed`` with the reason instead
of solving a problem that keeps killing its workers.

Wake-ups. An idle worker sleeps until pgqueuer's trigger notifies a change of the queue
(:mod:`.wakeups`), so a job queued on any replica starts within milliseconds; a re-check every
``safety_recheck_s`` covers a notification lost while the listening connection was down. The
worker that finishes a job notifies the replicas waiting on it.

Priority and retention. Solves run at ``nice`` (:mod:`.lowprio`). Every ``retention_s / 4`` (at
most 10 min) the worker deletes finished job records and pgqueuer log rows older than
``retention_s``; queued and running jobs are never touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from dataclasses import dataclass

from pgqueuer.domain.models import Job as QueueJob

from ..settings import mask_url
from ..solving.runner import ProcessRunner
from ..store import Store
from .jobtable import JobTable, retrying
from .lowprio import IDLE, run_solve_niced
from .queue import JobQueue
from .wakeups import Listener, done_channel, wait_woken

log = logging.getLogger("pipesched.scaleout")


@dataclass(frozen=True)
class WorkerConfig:
    db: str
    table_prefix: str = ""
    concurrency: int = 1
    max_attempts: int = 3
    heartbeat_timeout_s: float = 10.0
    kill_grace_s: float = 5.0
    nice: int | str = IDLE  # OS priority of the solve processes: 'idle', or 0 (as the worker) to 19 (lowprio)
    retention_s: float = 86400.0  # finished job records kept this long
    safety_recheck_s: float = 5.0  # idle re-claim without a notification (lost while reconnecting)


class Worker:
    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.store = Store(config.db, config.table_prefix)
        if self.store.dialect != "postgresql":
            raise ValueError(f"the worker needs a postgresql:// database (got {mask_url(config.db)!r})")
        self.table = JobTable(self.store.engine, config.table_prefix)
        self.queue = JobQueue(config.db, config.table_prefix)
        self.listener = Listener(self.queue.url, [self.queue.channel])
        self.done = done_channel(config.table_prefix)
        self.runner = ProcessRunner(config.kill_grace_s)
        self.running: dict[int, QueueJob] = {}
        self.stop = asyncio.Event()

    async def run(self) -> None:
        """Claim and solve until :attr:`stop` is set; then let running solves finish."""
        await self.queue.install()
        await self.listener.start()
        slots = asyncio.Semaphore(self.config.concurrency)
        tasks: set[asyncio.Task[None]] = set()
        chores = [asyncio.create_task(self._beat()), asyncio.create_task(self._prune())]
        recheck = min(self.config.safety_recheck_s, self.config.heartbeat_timeout_s / 2)
        try:
            with self.listener.watch(self.queue.channel) as changed:
                while not self.stop.is_set():
                    await slots.acquire()
                    changed.clear()  # before the claim: a job queued after it still wakes us
                    job = await self._claim()
                    if job is None:
                        slots.release()
                        await wait_woken(changed, recheck, self.stop)
                        continue
                    if int(job.id) in self.running:  # our own job, its heartbeat late (a starved host):
                        slots.release()              # the claim refreshed it; it is solving here already
                        log.warning("job %s re-claimed by its own worker after a late heartbeat", job.id)
                        continue
                    self.running[int(job.id)] = job
                    task = asyncio.create_task(self._handle(job))
                    tasks.add(task)
                    task.add_done_callback(lambda t, j=int(job.id): (
                        tasks.discard(t), self.running.pop(j, None), slots.release()))
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            for chore in chores:
                chore.cancel()
            self.runner.kill_all()
            await self.listener.close()
            await self.queue.close()
            self.store.close()

    async def _claim(self) -> QueueJob | None:
        try:
            return await self.queue.claim(self.config.heartbeat_timeout_s)
        except Exception:  # the database is away longer than the queue's retry window: keep trying
            log.exception("claiming a job failed")
            return None

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.config.heartbeat_timeout_s / 3)
            try:
                await self.queue.heartbeat(list(self.running))
            except Exception:
                log.exception("heartbeat failed")

    async def _prune(self) -> None:
        """Delete finished job records and queue log rows older than the retention, now and periodically."""
        every = min(self.config.retention_s / 4, 600.0)
        while True:
            try:
                jobs = await asyncio.to_thread(self.table.prune, self.config.retention_s)
                logs = await self.queue.prune_log(self.config.retention_s)
                if jobs or logs:
                    log.info("pruned %d finished jobs and %d queue log rows older than %g s",
                             jobs, logs, self.config.retention_s)
            except Exception:
                log.exception("pruning finished jobs failed")
            await asyncio.sleep(every)

    async def _handle(self, job: QueueJob) -> None:
        job_id = str(job.id)
        ok = False
        try:
            data = json.loads(job.payload or b"{}")
            key, method, budget = data["key"], data["method"], float(data["budget_s"])
            attempt = await asyncio.to_thread(self.table.start, job_id, key, method, budget, data["problem"],
                                              self.name)
            if attempt > self.config.max_attempts:
                reason = (f"gave up after {self.config.max_attempts} attempts: every worker that ran this "
                          "solve died before finishing it (killed, or out of memory)")
                await asyncio.to_thread(self.table.finish, job_id, "failed", "crashed", reason)
                return
            outcome, text = await asyncio.to_thread(
                self.runner.call, run_solve_niced,
                (self.config.nice, data["problem"], method, budget, data["hint"], self.runner.solver_workers), budget)
            if outcome == "ok":
                await asyncio.to_thread(retrying, self._store, key, method, budget, text)
                await asyncio.to_thread(self.table.finish, job_id, "done", outcome, None)
                ok = True
            else:
                await asyncio.to_thread(self.table.finish, job_id, "failed", outcome, text)
        except Exception as e:  # a bad payload or the database gone for good: fail the job, keep working
            log.exception("job %s failed", job_id)
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.table.finish, job_id, "failed", "error", f"{type(e).__name__}: {e}")
        finally:
            with contextlib.suppress(Exception):  # wake the requests waiting on it, on every replica
                await self.queue.notify(self.done, job_id)
            with contextlib.suppress(Exception):
                await self.queue.finish(job, ok)

    def _store(self, key: str, method: str, budget_s: float, schedule_json: str) -> None:
        data = json.loads(schedule_json)
        self.store.put(key=key, method=method, status=data["status"], objective_value=data.get("objective_value"),
                       lower_bound=data.get("lower_bound"), budget_s=budget_s,
                       solve_time_s=float(data.get("solve_time_s") or 0.0), schedule_json=schedule_json)

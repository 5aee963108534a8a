"""Where ``pipesched batch`` runs each problem: the engines, behind one small interface.

An engine is a function that solves one problem (``Engine.solve``) and a way to stop every solve
in flight (``Engine.stop``, called on Ctrl-C / SIGTERM). The driver (:mod:`pipesched.api.batch.run`)
owns reading, resuming, writing and the summary, so an engine only has to answer one problem at a
time from several threads. An engine that works better on many items at once (a cluster, where
each remote call has a fixed cost) sets ``Engine.stream`` instead: it is given every item, problems
and plan requests alike, and yields the answers as they arrive. ``ENGINES`` maps ``--engine NAME``
to a factory; a new engine (a cluster, a queue) registers one more entry beside ``local``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pipesched.solver.core.problem import Problem
from pipesched.solver.core.schedule import Schedule

from ..models import PlanRequest

if TYPE_CHECKING:
    from ..solving.runner import ProcessRunner

#: ``(schedule JSON, None)`` or ``(None, error message)``.
Answer = tuple[str | None, str | None]
#: An item for a streaming engine: a problem (with the schedule to warm-start from) or a plan request.
Work = tuple[Problem, Schedule | None] | PlanRequest
#: ``stream(items, stop)`` yields ``(index in items, answer, seconds it took)`` as answers arrive.
Stream = Callable[[list[Work], threading.Event], Iterator[tuple[int, Answer, float]]]


class StopBatch(Exception):  # noqa: N818 (a signal to the driver, not a failure of one problem)
    """An error every remaining problem would hit too (unknown method, refused token): stop the sweep."""


@dataclass(frozen=True)
class EngineConfig:
    """What every engine is told: the method, its time budget, and (remote) the service to use."""

    method: str
    time_limit_s: float
    server: str | None = None
    token: str | None = None
    jobs: int = 1


@dataclass
class Engine:
    """``solve(problem, hint)`` answers one problem (may raise :class:`StopBatch`); ``stop()`` kills
    whatever is running; ``slots`` overrides ``--jobs`` when the engine knows its own width;
    ``stream``, when set, is used instead of ``solve`` and answers plan requests too."""

    solve: Callable[[Problem, Schedule | None], Answer]
    stop: Callable[[], None] = field(default=lambda: None)
    slots: int | None = None
    stream: Stream | None = None


def answer_of(outcome: str, payload: str) -> Answer:
    """A solve process's (outcome, payload) as the driver's answer; an unknown method stops the batch
    (every problem would hit it)."""
    if outcome == "ok":
        return payload, None
    if outcome == "not_applicable" and payload.startswith("unknown method"):
        raise StopBatch(f"--method: {payload}")
    return None, payload


def stop_runner(runner: ProcessRunner) -> None:
    """Ctrl-C: kill the solves and whatever they started (PuLP runs CBC as a child process); each
    solve leads its own process group, so the kill takes the group (``runner.kill_group``)."""
    runner.kill_all()


def local_engine(config: EngineConfig) -> Engine:
    """One killable process per problem, forked from a warm forkserver (the service's runner)."""
    from ..solving.runner import ProcessRunner

    runner = ProcessRunner(kill_grace_s=max(5.0, config.time_limit_s))

    def solve(problem: Problem, hint: Schedule | None) -> Answer:
        hint_json = None if hint is None else hint.model_dump_json()
        return answer_of(*runner.run(problem.model_dump_json(), config.method, config.time_limit_s, hint_json))

    return Engine(solve=solve, stop=lambda: stop_runner(runner))


def server_engine(config: EngineConfig) -> Engine:
    """Through the service's cache (``--server URL``); the service warm-starts from its own entries."""
    from pipesched.client import Client, ServiceError

    assert config.server is not None
    client = Client(config.server, token=config.token, cache_dir=False, timeout=config.time_limit_s + 60, deadline_s=None,
                    priority="batch")  # a sweep queues behind interactive requests

    def solve(problem: Problem, hint: Schedule | None) -> Answer:
        try:
            return client.solve(problem, config.method, config.time_limit_s).model_dump_json(), None
        except ServiceError as e:
            if e.status in (0, 401, 403) or (e.status == 422 and "unknown method" in str(e)):  # 0: unreachable
                raise StopBatch(f"--server {config.server}: {e}") from None
            return None, str(e)

    return Engine(solve=solve)


#: ``--engine NAME`` -> factory. ``--server`` picks the service engine whatever this says.
ENGINES: dict[str, Callable[[EngineConfig], Engine]] = {"local": local_engine}


def make_engine(name: str, config: EngineConfig) -> Engine:
    if config.server:
        return server_engine(config)
    try:
        return ENGINES[name](config)
    except KeyError:
        raise StopBatch(f"--engine: unknown engine {name!r}; choose one of: {', '.join(ENGINES)}") from None

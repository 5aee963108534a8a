"""Python client of the schedule service, with a local on-disk cache and a local fallback.

Imports only the wire models and httpx (never FastAPI), so a trainer can depend on it cheaply::

    from pipesched.client import Client
    schedule = Client("http://scheduler:8000", fallback="local").solve(problem, time_limit_s=30)

Order of answers for ``solve``: the local cache (an answer the service gave earlier for the same
canonical problem, method and at least this budget, so a restarted trainer does not re-solve),
then the service, then, with ``fallback="local"``, a local solve in a forked child (with a warning;
Ctrl-C stops it at once, a native solver crash cannot take the caller down).

Asking the service has one total deadline, ``deadline_s`` (30 s by default), covering connecting,
queueing and waiting for the answer (a solve the service has accepted as a job is followed at least
until its ``time_limit_s`` + 10 s have passed, so it is not abandoned half done): connection errors,
429 (every solver busy) and 503 (the store away) are retried with jittered exponential back-off that
waits at least the ``Retry-After`` the service sends, 202 jobs are followed, and connecting gives up
after ``connect_timeout_s`` (3 s) a try. When the deadline passes with no answer, ``fallback="local"``
solves here; otherwise :class:`ServiceUnavailable` says why (the last refusal or error). Local answers are cached too, but marked as such: once the service is back,
it is asked again rather than trusting a fallback answer forever.

``plan(model, cluster)`` answers a model + cluster with a :class:`~pipesched.solver.planning.Plan`
(``POST /v1/plan``) in the same order: local cache, service, local fallback.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import httpx

from pipesched.solver.core.canonical import problem_key
from pipesched.solver.core.problem import Problem
from pipesched.solver.core.schedule import Schedule

if TYPE_CHECKING:  # planning is imported when a plan is asked for, not with the client
    from pipesched.solver.planning import Cluster, Model, Plan

#: Header that marks a request as batch work (docs/scale-out.md, "Priority").
PRIORITY_HEADER = "x-pipesched-priority"

FINAL_STATUSES = ("optimal", "infeasible")
#: An accepted solve (202) is followed at least its time limit plus this, so it is not abandoned.
DEADLINE_MARGIN_S = 10.0
#: Longest pause between two attempts (before the Retry-After floor).
MAX_BACKOFF_S = 5.0


class ServiceError(RuntimeError):
    """The service answered but refused or failed the request; ``status`` is the HTTP status."""

    def __init__(self, status: int, message: str, body: Any = None) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.body = body


class ServiceUnavailable(ServiceError):
    """No answer from the service within the deadline: unreachable (``status`` 0), or busy or without
    its store the whole time (``status`` 429 or 503, the last refusal); the message says which."""

    def __init__(self, status: int, message: str, body: Any = None, *, reason: str = "") -> None:
        super().__init__(status, message, body)
        self.reason = reason or message


class JobPending(ServiceError):
    """``solve(..., wait=False)`` and the service is still solving: poll ``Client.job(job)`` later."""

    def __init__(self, job: str, key: str) -> None:
        super().__init__(202, f"solve still running as job {job}")
        self.job = job
        self.key = key


def default_cache_dir() -> Path:
    explicit = os.environ.get("PIPESCHED_CLIENT_CACHE")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pipesched"


class LocalCache:
    """One JSON file per (problem key, method): ``{"source", "budget_s", "schedule"}``, written atomically."""

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory).expanduser()

    def _path(self, key: str, method: str) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in method)
        return self.dir / f"{key}.{safe}.json"

    def get(self, key: str, method: str) -> dict[str, Any] | None:
        try:
            data = json.loads(self._path(key, method).read_text())
            return data if isinstance(data, dict) and "schedule" in data else None
        except (OSError, ValueError):
            return None  # missing or unreadable: treat as a miss

    def put(self, key: str, method: str, schedule_json: str, budget_s: float, source: str) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        text = f'{{"source":{json.dumps(source)},"budget_s":{float(budget_s)!r},"schedule":{schedule_json}}}'
        fd, tmp = tempfile.mkstemp(dir=self.dir, suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.replace(tmp, self._path(key, method))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


class Client:
    """Ask a pipesched service for schedules.

    ``deadline_s`` bounds each ``solve``/``plan`` call's time with the service (None: no bound, then
    ``retries`` bounds the attempts); ``retries`` caps the attempts of one request (None: as many as the
    deadline allows); the pause before attempt ``i`` is ``backoff_s * 2**i`` (at most 5 s), jittered, and
    at least the service's ``Retry-After``. ``connect_timeout_s`` bounds connecting; ``timeout`` the wait
    for one response (default: the request's ``wait_s`` + 10 s). ``cache_dir=None`` uses
    ``$PIPESCHED_CLIENT_CACHE`` or ``~/.cache/pipesched``, ``cache_dir=False`` disables it.
    ``priority="batch"`` marks the solves as a sweep's: a ``--workers external`` service runs
    interactive requests first.
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        timeout: float | None = None,
        *,
        fallback: Literal["local"] | None = None,
        cache_dir: str | Path | None | Literal[False] = None,
        retries: int | None = None,
        backoff_s: float = 0.25,
        poll_s: float = 0.5,
        priority: Literal["interactive", "batch"] = "interactive",
        deadline_s: float | None = 30.0,
        connect_timeout_s: float = 3.0,
    ) -> None:
        self.url = url.rstrip("/")
        self.fallback = fallback
        self.retries = None if retries is None else max(1, retries)
        if deadline_s is None and self.retries is None:
            self.retries = 4
        self.backoff_s = backoff_s
        self.poll_s = poll_s
        self.deadline_s = deadline_s
        self.timeout = timeout
        self.connect_timeout_s = connect_timeout_s
        self.cache = None if cache_dir is False else LocalCache(cache_dir or default_cache_dir())
        headers = {"authorization": f"Bearer {token}"} if token else {}
        if priority == "batch":  # a scale-out service queues these behind trainers' requests
            headers[PRIORITY_HEADER] = "batch"
        self._http = httpx.Client(base_url=self.url, headers=headers)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # ------------------------------------------------------------------ solve
    def solve(
        self,
        problem: Problem | dict[str, Any],
        method: str = "auto",
        time_limit_s: float = 10.0,
        wait: bool = True,
        wait_s: float = 30.0,
    ) -> Schedule:
        """The schedule for ``problem`` (model or plain dict). With ``wait=False`` a solve that is not
        done within ``wait_s`` raises :class:`JobPending` instead of being followed to completion."""
        problem = problem if isinstance(problem, Problem) else Problem.model_validate(problem)
        key = problem_key(problem)
        cached = self.cache.get(key, method) if self.cache else None
        if cached and cached.get("source") == "server" and _enough(cached, time_limit_s):
            return _with_problem(cached["schedule"], problem)
        try:
            schedule_json = self._solve_remote(problem, method, time_limit_s, wait, wait_s)
        except ServiceUnavailable as e:
            if self.fallback != "local":
                raise
            if cached:  # an earlier answer beats solving again
                return _with_problem(cached["schedule"], problem)
            schedule_json = self._solve_local(problem, method, time_limit_s, e)
            source = "local"
        else:
            source = "server"
        if self.cache:
            self.cache.put(key, method, schedule_json, time_limit_s, source)
        return Schedule.model_validate_json(schedule_json).model_copy(update={"problem": problem})

    def _solve_remote(self, problem: Problem, method: str, time_limit_s: float, wait: bool, wait_s: float) -> str:
        body = {"problem": problem.model_dump(mode="json"), "method": method, "time_limit_s": time_limit_s}
        return self._post("/v1/solve", body, "schedule", wait, wait_s, time_limit_s)

    # ------------------------------------------------------------------- plan
    def plan(
        self,
        model: Model | dict[str, Any],
        cluster: Cluster | dict[str, Any],
        method: str = "auto",
        time_limit_s: float = 10.0,
        wait: bool = True,
        wait_s: float = 30.0,
        *,
        module_names: str | None = None,
    ) -> Plan:
        """The plan (split, recompute, schedule) of ``model`` on ``cluster``, in the same order as
        :meth:`solve`: the local cache, then ``POST /v1/plan`` (202 jobs followed), then with
        ``fallback="local"`` and the service unreachable an in-process plan (with a warning)."""
        from pipesched.solver.planning import Cluster, Model, Plan
        from pipesched.solver.planning.key import plan_key

        model = model if isinstance(model, Model) else Model.model_validate(model)
        cluster = cluster if isinstance(cluster, Cluster) else Cluster.model_validate(cluster)
        key, slot = plan_key(model, cluster, module_names), f"plan-{method}"
        cached = self.cache.get(key, slot) if self.cache else None
        if cached and cached.get("source") == "server" and _enough(cached, time_limit_s):
            return Plan.model_validate(cached["schedule"])
        body = {"model": model.model_dump(mode="json"), "cluster": cluster.model_dump(mode="json"), "method": method,
                "time_limit_s": time_limit_s, "module_names": module_names}
        try:
            plan_json = self._post("/v1/plan", body, "plan", wait, wait_s, time_limit_s)
        except ServiceUnavailable as e:
            if self.fallback != "local":
                raise
            if cached:
                return Plan.model_validate(cached["schedule"])
            plan_json = self._plan_local(model, cluster, method, time_limit_s, module_names, e)
            source = "local"
        else:
            source = "server"
        if self.cache:
            self.cache.put(key, slot, plan_json, time_limit_s, source)
        return Plan.model_validate_json(plan_json)

    def _post(self, path: str, body: dict[str, Any], answer: str, wait: bool, wait_s: float,
              time_limit_s: float) -> str:
        """POST ``body``; the ``answer`` field of the reply (``schedule`` or ``plan``) as JSON text,
        following a 202 job to completion unless ``wait`` is False; all within the call's deadline."""
        deadline = self._deadline()
        # ask the service to answer (200 or 202) before the deadline, so the reply is not cut off
        sent_wait = max(0.0, min(wait_s, deadline - time.monotonic() - 2.0))
        r = self._request("POST", path, deadline, sent_wait + 10.0, json={**body, "wait_s": sent_wait})
        if r.status_code == 202:
            job = r.json()["job"]
            if not wait:
                raise JobPending(job, r.json()["key"])
            # accepted: the solve is not abandoned before its own time limit (+ a margin) has passed
            return self._follow(job, answer, max(deadline, time.monotonic() + time_limit_s + DEADLINE_MARGIN_S))
        return json.dumps(r.json()[answer])

    def _deadline(self) -> float:
        """When this call stops asking the service (monotonic clock; inf without a deadline)."""
        return float("inf") if self.deadline_s is None else time.monotonic() + self.deadline_s

    def _plan_local(self, model: Model, cluster: Cluster, method: str, time_limit_s: float,
                    module_names: str | None, why: ServiceUnavailable) -> str:
        from pipesched.solver.formats.torch_csv import to_torch_csv
        from pipesched.solver.isolated import call_isolated
        from pipesched.solver.planning import plan
        from pipesched.solver.planning.cli import parse_module_names

        warnings.warn(f"pipesched service at {self.url} is unreachable; planning with {method!r} on this machine "
                      f"(time limit {time_limit_s:g} s): {why.reason}", RuntimeWarning, stacklevel=3)
        names = parse_module_names(module_names) if module_names else None
        # in a child: Ctrl-C stops the trainer at once (in-process, CP-SAT takes SIGINT as "end this
        # search" and the plan went on with the next), and a native solver crash cannot take it down
        found = call_isolated(plan, model, cluster, method, time_limit_s, names=names)
        if found.schedule is not None and found.exports is not None:  # as the service and the CLI fill it
            found.exports = found.exports.model_copy(update={"torch_csv": to_torch_csv(found.schedule)})
        return found.model_dump_json()

    def job(self, job: str) -> dict[str, Any]:
        """The service's report on a job: ``state`` and, when done, ``result``."""
        return self._request("GET", f"/v1/jobs/{job}", self._deadline(), 10.0).json()

    def _follow(self, job: str, answer: str, deadline: float) -> str:
        while True:
            r = self._request("GET", f"/v1/jobs/{job}", deadline, 10.0)
            data = r.json()
            if data["state"] == "done":
                return json.dumps(data["result"][answer])
            if data["state"] == "failed":
                raise ServiceError(r.status_code, f"job {job} failed: {data.get('error')}", data)
            left = deadline - time.monotonic()
            if left <= self.poll_s:
                raise ServiceUnavailable(0, f"{self.url} accepted the request as job {job} but it was not done "
                                            f"within the deadline (deadline_s = {self.deadline_s:g} s)",
                                         reason=f"job {job} still {data['state']} at the deadline")
            time.sleep(self.poll_s)

    def _request(self, verb: str, path: str, deadline: float, read_s: float, **kwargs: Any) -> httpx.Response:
        """One request, retried on connection errors, 429 and 503 until ``deadline`` (or ``retries``
        attempts): jittered exponential back-off, never sooner than the service's ``Retry-After``."""
        attempt, last, status = 0, "no attempt made", 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or (self.retries is not None and attempt >= self.retries):
                bound = (f"within the deadline (deadline_s = {self.deadline_s:g} s)" if left <= 0
                         else f"after {attempt} attempts")
                what = f"cannot reach {self.url}" if status == 0 else f"no answer from {self.url}"
                raise ServiceUnavailable(status, f"{what} {bound}: {last}", reason=last)
            attempt += 1
            timeout = httpx.Timeout(min(self.timeout or read_s, left), connect=min(self.connect_timeout_s, left))
            retry_after = None
            try:
                r = self._http.request(verb, path, timeout=timeout, **kwargs)
            except httpx.TransportError as e:  # refused, reset, timed out: worth another try
                last, status = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__, 0
            else:
                if r.status_code not in (429, 503):
                    if r.status_code >= 400:
                        raise ServiceError(r.status_code, _message(r), _json_or_none(r))
                    return r
                last, status, retry_after = f"HTTP {r.status_code}: {_message(r)}", r.status_code, _retry_after(r)
            pause = random.uniform(0.5, 1.0) * min(MAX_BACKOFF_S, self.backoff_s * 2 ** (attempt - 1))
            if retry_after is not None:  # honour it, spread a little so a fleet does not return at once
                pause = max(pause, retry_after * random.uniform(1.0, 1.25))
            time.sleep(max(0.0, min(pause, deadline - time.monotonic())))

    def _solve_local(self, problem: Problem, method: str, time_limit_s: float, why: ServiceUnavailable) -> str:
        from pipesched.solver import SolveOptions
        from pipesched.solver.isolated import solve_isolated

        warnings.warn(
            f"pipesched service at {self.url} is unreachable; solving {method!r} on this machine "
            f"(time limit {time_limit_s:g} s): {why.reason}",
            RuntimeWarning,
            stacklevel=3,
        )
        return solve_isolated(problem, method, SolveOptions(time_limit_s=time_limit_s)).model_dump_json()


def _enough(cached: dict[str, Any], time_limit_s: float) -> bool:
    status = cached["schedule"].get("status")
    return status in FINAL_STATUSES or float(cached.get("budget_s", 0)) >= time_limit_s


def _with_problem(schedule: dict[str, Any], problem: Problem) -> Schedule:
    return Schedule.model_validate({**schedule, "problem": problem})


def _retry_after(r: httpx.Response) -> float | None:
    """``Retry-After`` in seconds (the delta form; an HTTP date is not used by this service)."""
    try:
        return max(0.0, float(r.headers.get("retry-after", "")))
    except ValueError:
        return None


def _json_or_none(r: httpx.Response) -> Any:
    try:
        return r.json()
    except ValueError:
        return None


def _message(r: httpx.Response) -> str:
    data = _json_or_none(r)
    if isinstance(data, dict):
        return str(data.get("error") or data.get("detail") or data)
    return r.text[:500]

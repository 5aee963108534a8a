"""Every deterministic answer, independent of the clock: the regression check of a refactor.

A refactor of the portfolio, the budget or the list schedulers must not change an answer. Timing ``auto``
cannot show it on a shared machine (a wall-clock net that fires under load changes the answer for
reasons of its own), so this runs the solver with its clock frozen and its three exact searches
replaced by recorders (CP-SAT on the full model, on windows of the incumbent and on F&B pairs, the
relaxation bound, the small problems' ILP): what
is compared is every heuristic's objective, ``auto``'s candidates and its final answer, and the
budget each exact search would have been given (its nominal seconds and deterministic time). Those are
a function of the problem and the limit alone.

    python benchmarks/answers.py -o before.json          # on the old commit
    python benchmarks/answers.py -o after.json           # on the new one
    python benchmarks/answers.py --compare before.json after.json

Cases: the tuning set (``benchmarks/cases.py``) and a few small ones of every placement, fused and
with F&B pairs. Limits 2 s and 10 s. Nothing here is a figure to quote.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import tuning  # noqa: E402

from pipesched.solver import Problem, SolveOptions, methods  # noqa: E402

LIMITS = (2.0, 10.0)
SMALL = {
    "loop p3 m6 comm": Problem(devices=3, microbatches=6, costs={"forward": [1, 2, 1.5], "comm": 0.3},
                               memory={"limit": 3}),
    "loop2 p2 m4 fused span": Problem(devices=2, microbatches=4, stages_per_device=2, split_backward=False,
                                      objective="stage_span"),
    "v p4 m8 1.2x": Problem(devices=4, microbatches=8, stages_per_device=2, placement="v",
                            costs={"backward_input": 1.2, "backward_weight": 0.7}, memory={"limit": "1.2x1f1b"}),
    "dual p4 m8 pairs": Problem(devices=4, microbatches=8, stages_per_device=2, placement="dual",
                                costs={"overlap_fb": 0.6, "comm": 0.1}),
}


class FrozenTime(types.ModuleType):
    """The ``time`` module as the solver sees it here: the clock never moves, so no wall-clock net fires."""

    def __init__(self) -> None:
        super().__init__("time")

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def perf_counter() -> float:
        return 0.0

    @staticmethod
    def process_time() -> float:
        return 0.0

    @staticmethod
    def monotonic() -> float:
        return 0.0


def _numbers(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The plain numbers among a call's arguments, and an incumbent's objective (what decides the call)."""
    out: list[Any] = []
    for value in (*args, *kwargs.values()):
        if isinstance(value, SolveOptions):
            out += [value.time_limit_s, value.workers]
        elif isinstance(value, bool | int | float):
            out.append(round(value, 9) if isinstance(value, float) else value)
        elif hasattr(value, "objective") and isinstance(value.objective, float):
            out.append(("incumbent", round(value.objective, 9)))
    return out


def _hint_back(problem: Problem, options: SolveOptions) -> Any:
    """The paired search's stand-in: its warm start back, or no schedule."""
    from pipesched.solver import no_schedule

    if options.hint is not None:
        return options.hint.model_copy(update={"method": "cpsat"})
    return no_schedule(problem, "cpsat", "timeout", "recorder")


def _install(trace: list[Any]) -> None:
    """Freeze the clock in every solver module and put recorders in place of the exact searches."""
    methods()  # load every method module first
    from pipesched.solver.exact.cpsat import lns, overlap_run, relaxations, run
    from pipesched.solver.portfolio import small

    def recorder(name: str, answer: Callable[..., Any]) -> Callable[..., Any]:
        def record(*args: Any, **kwargs: Any) -> Any:
            trace.append([name, _numbers(args, kwargs)])
            return answer(*args, **kwargs)
        return record

    def no_search(inst: Any, inc: Any, *args: Any, known_bound: float | None = None, **kwargs: Any) -> Any:
        return run.CpsatResult(inc, False, known_bound)

    def no_window(inst: Any, inc: Any, runs: Any, *, seconds: float, **kwargs: Any) -> Any:
        return lns.WindowResult(inc, False, seconds)  # counted as a window that ran out of search

    stubs = {
        run.solve_model: recorder("cpsat search", no_search),
        relaxations.relaxation_bound: recorder("relaxation bound", lambda *a, **k: 0.0),
        small.ilp_first: recorder("ilp first", lambda problem, inst, inc, seconds: (inc, False, None)),
        overlap_run.solve_paired: recorder("paired cpsat", lambda problem, options: _hint_back(problem, options)),
        lns.solve_window: recorder("cpsat window", no_window),
    }
    freeze_solver(stubs)


def freeze_solver(stubs: dict[Callable[..., Any], Callable[..., Any]],
                  set_attr: Callable[[Any, str, Any], None] = setattr) -> None:
    """In every loaded ``pipesched.solver`` module: ``time`` is :class:`FrozenTime` and each callable of
    ``stubs`` its stand-in (``set_attr``: a test passes ``monkeypatch.setattr`` so it is undone)."""
    frozen = FrozenTime()
    for name, module in list(sys.modules.items()):
        if not name.startswith("pipesched.solver") or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if value is time:
                set_attr(module, attr, frozen)
            elif callable(value) and value in stubs:
                set_attr(module, attr, stubs[value])


def answers() -> dict[str, Any]:
    trace: list[Any] = []
    _install(trace)
    from pipesched.solver.core.errors import InvalidScheduleError, NotApplicableError
    from pipesched.solver.timing.simulate import DeadlockError

    skipped = (NotApplicableError, InvalidScheduleError, DeadlockError, ValueError)

    cases = {c.name: c.problem for c in tuning()} | SMALL
    out: dict[str, Any] = {}
    for name, problem in cases.items():
        row: dict[str, Any] = {}
        for m in methods():
            if m.name in ("auto", "cpsat", "ilp") or m.applies(problem):
                continue
            try:
                got = m.run(problem, SolveOptions(time_limit_s=10.0, workers=1))
            except skipped as e:
                row[m.name] = f"skipped: {type(e).__name__}"
                continue
            row[m.name] = [got.status, got.objective_value]
        auto = next(m for m in methods() if m.name == "auto")
        for limit in LIMITS:
            trace.clear()
            got = auto.run(problem, SolveOptions(time_limit_s=limit, workers=2))
            row[f"auto {limit:g}s"] = {"status": got.status, "objective": got.objective_value,
                                      "bound": got.lower_bound, "exact searches": list(trace)}
        out[name] = row
        print(name, flush=True)
    return out


def compare(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    diffs = []
    for case in sorted(set(a) | set(b)):
        ra, rb = a.get(case, {}), b.get(case, {})
        for key in sorted(set(ra) | set(rb)):
            if ra.get(key) != rb.get(key):
                diffs.append(f"{case} / {key}:\n  before {ra.get(key)}\n  after  {rb.get(key)}")
    return diffs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--out", type=Path, help="write the answers here (JSON)")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args(argv)
    if args.compare:
        diffs = compare(*(json.loads(p.read_text()) for p in args.compare))
        print("\n".join(diffs) if diffs else "every answer is the same")
        return 1 if diffs else 0
    result = answers()
    text = json.dumps(result, indent=1, sort_keys=True)
    if args.out:
        args.out.write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

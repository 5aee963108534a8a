"""How ``auto`` uses its limit: per tuning case, the answer at 10 s and 60 s, the wall, the share of the
limit used and whether it was proven; ``--rates`` measures CP-SAT's deterministic units per CPU second
by kind of model (the idle rates ``auto`` counts its searches at, ``solver/budget/limit.py``).

    python benchmarks/limit_use.py                  # tuning cases up to FULL_MODEL_OPS ops, 10 s and 60 s
    python benchmarks/limit_use.py --quick          # six of them, 2 s and 10 s
    python benchmarks/limit_use.py --rates --quick  # the idle rates, from every CP-SAT solve of the run
    python benchmarks/limit_use.py --large --rates  # the tuning cases above FULL_MODEL_OPS ops, 10 s and 60 s,
                                                    # and the CPU per op of the order searches that fill them

The share used is wall / limit, the figure the 75% rule reads on an idle machine (a run under load says
so in the header and its walls are inflated); ``counted`` is the nominal seconds the solver counted, a
function of the problem and the limit alone. Writes ``benchmarks/results/limit_use.md`` (``--quick``:
``limit_use_quick.md``, ``--large``: ``limit_use_large.md``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from ortools.sat.python import cp_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import tuning  # noqa: E402
from report import command_line, publish  # noqa: E402

from pipesched.solver import Instance, SolveOptions, solve  # noqa: E402
from pipesched.solver.budget import FULL_MODEL_OPS  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
QUICK = (0, 9, 4, 14, 21, 13)  # small to mid-size, loop and V, both objectives
_RATES: dict[str, list[tuple[float, float]]] = defaultdict(list)
_SETUP: list[float] = []  # CPU seconds per op of windows CP-SAT closed at once (under 0.01 units)
_LAST: list[float] = [1.0]  # the deterministic time of the latest solve
_CHAIN: dict[str, list[tuple[float, str]]] = defaultdict(list)  # CPU s per op and unit of the fill's searches
_CASE: list[str] = [""]  # the case being solved, for the rates' table


def _kind(model: cp_model.CpModel) -> str:
    if any(c.has_cumulative() or c.has_reservoir() for c in model.proto.constraints):
        return "resource"
    return "no resource"


def _record_rates() -> None:
    """Wrap CP-SAT's solve: each call's deterministic time against the process's CPU time over it."""
    solve_cp = cp_model.CpSolver.solve

    def timed(self: cp_model.CpSolver, model: cp_model.CpModel, *args: Any, **kwargs: Any) -> Any:
        c0 = time.process_time()
        status = solve_cp(self, model, *args, **kwargs)
        cpu = time.process_time() - c0
        _LAST[0] = self.deterministic_time
        workers = self.parameters.num_workers
        linear = "no LP" if self.parameters.linearization_level == 0 else "LP"
        _RATES[f"{_kind(model)}, {linear}, {workers} worker{'s' * (workers > 1)}"].append(
            (self.deterministic_time, cpu))
        return status

    cp_model.CpSolver.solve = timed  # type: ignore[method-assign]
    from pipesched.solver.exact.cpsat import lns as cpsat_lns
    from pipesched.solver.portfolio import lns

    window = cpsat_lns.solve_window

    def set_up(inst: Any, inc: Any, runs: Any, **kwargs: Any) -> Any:
        c0, _LAST[0] = time.process_time(), 1.0
        res = window(inst, inc, runs, **kwargs)
        if _LAST[0] < 0.01:
            _SETUP.append((time.process_time() - c0) / inst.num_ops)
        return res

    lns.solve_window = set_up


def _record_chain() -> None:
    """Wrap the final phase's two searches above FULL_MODEL_OPS: CPU seconds per op and unit counted (a
    trial of the critical-chain search, a re-chosen tail), the figures its idle rates are set from."""
    from pipesched.solver.portfolio.chain_fill import ChainFillPhase

    for name, unit in (("_search", ChainFillPhase.trial_cost), ("_best_tail", ChainFillPhase.tail_cost)):
        step = getattr(ChainFillPhase, name)

        def timed(self: Any, s: Any, *args: Any, _step: Any = step, _unit: Any = unit, _name: str = name) -> Any:
            c0, spent = time.process_time(), s.budget.spent
            out = _step(self, s, *args)
            units = (s.budget.spent - spent) / _unit(s)
            if units >= 1:
                _CHAIN[_name].append(((time.process_time() - c0) / (units * s.inst.num_ops), _CASE[0]))
            return out

        setattr(ChainFillPhase, name, timed)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="six cases at 2 s and 10 s")
    ap.add_argument("--limits", default="", help="comma-separated seconds (default 10,60; --quick 2,10)")
    ap.add_argument("--large", action="store_true", help=f"the tuning cases above {FULL_MODEL_OPS} ops")
    ap.add_argument("--rates", action="store_true", help="also measure CP-SAT's units per CPU second (--large: "
                                                         "the order searches' CPU per op and trial)")
    args = ap.parse_args(argv)
    limits = [float(x) for x in args.limits.split(",")] if args.limits else ([2.0, 10.0] if args.quick else [10.0, 60.0])
    if args.rates:
        _record_chain() if args.large else _record_rates()
    load = os.getloadavg()
    cases = [c for c in tuning() if (Instance.from_problem(c.problem).num_ops > FULL_MODEL_OPS) == args.large]
    if args.quick:
        cases = [tuning()[i] for i in QUICK]
    rows = []
    for case in cases:
        _CASE[0] = case.name
        cells = []
        values = []
        for limit in limits:
            t = time.perf_counter()
            got = solve(case.problem, "auto", SolveOptions(time_limit_s=limit))
            wall = time.perf_counter() - t
            values.append(got.objective_value)
            note = "exhausted" if got.reason and "exhausted" in got.reason else (
                "wall cut" if got.reason and "wall clock" in got.reason else "")
            cells.append(f"{got.objective_value:.6g} | {got.status[:3]} | {wall:.1f} | {wall / limit:.0%} | {note}")
        monotone = all(b <= a + 1e-9 * abs(a) for a, b in zip(values, values[1:], strict=False))
        line = f"| {case.name} | {Instance.from_problem(case.problem).num_ops} | " + " | ".join(cells) + \
            f" | {'yes' if monotone else 'NO'} |"
        print(line, file=sys.stderr, flush=True)
        rows.append(line)
    heads = " | ".join(f"{x:g} s value | status | wall (s) | share used | note" for x in limits)
    text = (
        f"# How `auto` uses its limit on the tuning set{' above ' + str(FULL_MODEL_OPS) + ' ops' if args.large else ''}\n\n"
        f"Made by `{command_line('limit_use.py', argv)}`: one process, `auto` per case and limit; share used = "
        f"wall / limit; 'wall cut': the wall clock ended a phase (a loaded machine); 'exhausted': the windows "
        f"(above {FULL_MODEL_OPS} ops: the order searches) were searched to their end. Load average {load[0]:.1f} at the start (2 cores).\n\n"
        f"| case | ops | {heads} | not worse at the larger limit |\n"
        "|---|---|" + "---|---|---|---|---|" * len(limits) + "---|\n" + "\n".join(rows) + "\n"
    )
    if _RATES:
        text += ("\n## CP-SAT's deterministic units per CPU second\n\n| model | solves | dtime | CPU s | units per CPU s |\n"
                 "|---|---|---|---|---|\n")
        for kind, pairs in sorted(_RATES.items()):
            d, c = sum(p[0] for p in pairs), sum(p[1] for p in pairs)
            text += f"| {kind} | {len(pairs)} | {d:.2f} | {c:.2f} | {d / c if c else 0:.3f} |\n"
        if _SETUP:
            text += (f"\nwindow set-up per op (CPU s of the {len(_SETUP)} windows CP-SAT closed under 0.01 units, "
                     f"over ops): median {sorted(_SETUP)[len(_SETUP) // 2]:.2e}, max {max(_SETUP):.2e}\n")
    if _CHAIN:
        text += ("\n## CPU seconds per op and counted unit of the order searches that fill the limit\n\n"
                 "| search | runs | median | max | largest on |\n|---|---|---|---|---|\n")
        for name, label in (("_search", "critical-chain search, per trial"), ("_best_tail", "re-chosen tails, per tail")):
            xs = sorted(_CHAIN[name])
            if xs:
                text += f"| {label} | {len(xs)} | {xs[len(xs) // 2][0]:.2e} | {xs[-1][0]:.2e} | {xs[-1][1]} |\n"
    name = "limit_use_quick.md" if args.quick else ("limit_use_large.md" if args.large else "limit_use.md")
    publish(text, RESULTS / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())

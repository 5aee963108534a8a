"""How long CP-SAT's root set-up takes on memory-capped models, where it does not look at the clock.

Why it matters: the wall-clock limit (``max_time_in_seconds``) is only checked once the search runs.
Before that, the linear relaxation of the memory cumulative and the root probing run to completion,
and on large capped models they took longer than a 10 s limit (docs/limits.md). ``solver/budget/``
sizes that set-up as ``SETUP_S_PER_PAIR`` seconds per pair of ops on one capped device; this
benchmark measures it: the full model of ``auto``'s CP-SAT search (zero-bubble 1.5B profile, loop,
v = 1, stage span, 2p cap: ``benchmarks/large_problems.py``'s family), one worker, a deterministic
limit of 0.05 so the search itself is negligible, with a busy loop on the other core. Set-up =
wall with the relaxation and probing minus wall without them.

    python benchmarks/cpsat_setup.py

Writes ``benchmarks/results/cpsat_setup.md``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from ortools.sat.python import cp_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from large_problems import large_problem  # noqa: E402
from report import command_line, publish  # noqa: E402

from pipesched.solver import Instance  # noqa: E402
from pipesched.solver.bounds.combinatorial import combinatorial_bound  # noqa: E402
from pipesched.solver.budget import SETUP_S_PER_PAIR  # noqa: E402
from pipesched.solver.exact.cpsat.formulation import OpGraph, build  # noqa: E402
from pipesched.solver.exact.cpsat.run import (  # noqa: E402
    add_hint,
    device_op_pairs,
    horizon_value,
    model_lower,
    root_setup_cost,
)
from pipesched.solver.exact.cpsat.scaling import Scaling  # noqa: E402
from pipesched.solver.heuristics.warm_start import grid_starts  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "cpsat_setup.md"
SIZES = ((4, 16), (8, 32), (16, 32), (8, 64), (16, 64), (32, 32))


def _wall(model: cp_model.CpModel, full: bool) -> float:
    """Wall seconds of one solve with a negligible search: what is left is the set-up."""
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.num_workers, prm.random_seed, prm.cp_model_presolve = 1, 1, False
    prm.max_time_in_seconds, prm.max_deterministic_time = 60.0, 0.05
    if not full:
        prm.linearization_level, prm.cp_model_probing_level = 0, 0
    t0 = time.perf_counter()
    solver.solve(model)
    return time.perf_counter() - t0


def measure(p: int, m: int) -> tuple[int, int, float, float, float]:
    """(ops, sum over devices of ops^2, wall with set-up, wall without, our estimate)."""
    inst = Instance.from_problem(large_problem(p, m, "1.5B"))
    sc = Scaling.of(inst)
    inc = grid_starts(inst, 0.0, keep=1)[0][1]
    cm = build(inst, sc, OpGraph.full(inst, sc), horizon=horizon_value(inst, sc, inc.objective),
               lower=model_lower(inst, sc, combinatorial_bound(inst)), upper=sc.up(inc.objective) + 1)
    add_hint(cm, inc.start)
    return inst.num_ops, device_op_pairs(inst), _wall(cm.model, True), _wall(cm.model, False), root_setup_cost(inst, sc)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    load_before = os.getloadavg()
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    rows, rates = [], []
    try:
        for p, m in SIZES:
            ops, pairs, full, bare, estimate = measure(p, m)
            rate = (full - bare) / pairs
            rates.append(rate)
            rows.append(f"| p{p} m{m} | {ops} | {3 * m} | {pairs} | {full:.2f} | {bare:.2f} | {full - bare:.2f} | "
                        f"{rate:.2e} | {estimate:.2f} |")
            print(rows[-1], flush=True)
    finally:
        busy.terminate()
        busy.wait(timeout=10)
    text = "\n".join([
        "# CP-SAT's root set-up on memory-capped models",
        "",
        f"Made by `{command_line('cpsat_setup.py', argv)}`. One worker, deterministic limit 0.05, a busy loop on "
        "the other core. Set-up = wall with the linear relaxation and probing minus wall without; pairs = the sum "
        "over devices of (ops on the device)^2; estimate = `root_setup_cost` (what the search must be planned to "
        f"get before it keeps them; `SETUP_S_PER_PAIR` = {SETUP_S_PER_PAIR:g}).",
        "",
        f"Set-up per pair: {min(rates):.2e} to {max(rates):.2e} s.",
        "",
        "| case | ops | ops per device | pairs | wall with s | wall without s | set-up s | s per pair | estimate s |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ])
    publish(text, args.out, load_before)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

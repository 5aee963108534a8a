"""Run the ILP model: CBC through PuLP in-process, or HiGHS in a subprocess; report what was proven.

PuLP says "Optimal" for a CBC run stopped by its time limit; what the solver really proved is
read from ``sol_status`` (and CBC's log for the bound), and given back as a :class:`RunResult`.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ...core.errors import NotApplicableError
from .model import IlpModel, pulp

_HIGHS_SCRIPT = Path(__file__).with_name("highs_worker.py")


def cbc_solver(**kwargs: object) -> pulp.LpSolver:
    """CBC: a system ``cbc`` when PuLP finds one, else the binary bundled with PuLP's wheel."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the bundled CBC is deprecated, not gone
        system = pulp.COIN_CMD(**kwargs)
        return system if system.available() else pulp.PULP_CBC_CMD(**kwargs)


@dataclass
class RunResult:
    """What a backend proved: status optimal|feasible|infeasible|none, values by variable name."""

    status: str
    objective: float | None = None
    bound: float | None = None
    values: dict[str, float] = field(default_factory=dict)


def run_cbc(model: IlpModel, time_limit: float, warm: bool) -> RunResult:
    """CBC on the model, killed if it overruns; ``sol_status`` separates proof from stopped-on-time.

    PuLP's own ``solve`` waits on CBC without a timeout, and CBC checks its ``-sec`` limit only
    between phases: on a model with 50k rows its root LP alone ran 50 s past a 6 s limit. So
    PuLP writes the files (MPS, MIP start) and reads the solution, but the process runs here,
    with a hard deadline. The best bound of an unfinished run is read from CBC's log ("Lower
    bound: ..."), rounded down by its last printed digit so it stays a valid bound. MIP
    preprocessing is off: the CBC bundled with PuLP segfaults when its time runs out inside
    preprocessing with a MIP start, and on these models it did not pay for itself anyway. A crash
    or a kill leaves the warm start as the answer.
    """
    deadline = time.perf_counter() + time_limit
    prob = model.prob
    solver = cbc_solver(msg=False)
    with tempfile.TemporaryDirectory(prefix="pipesched-cbc-") as tmp:
        mps, mst, sol, log = (str(Path(tmp) / n) for n in ("model.mps", "start.mst", "model.sol", "cbc.log"))
        variables, var_names, con_names, _ = prob.writeMPS(mps, rename=1)
        args = [solver.path, mps]
        if warm:
            solver.writesol(mst, prob, variables, var_names, con_names)
            args += ["-mips", mst]
        limit = max(0.05, deadline - time.perf_counter())  # writing the files took some of it
        args += [
            "-sec", f"{limit:.3f}", "-timeMode", "elapsed", "-preprocess", "off", "-ratio", "0", "-threads", "1",
            "-solve", "-printingOptions", "all", "-solution", sol,
        ]
        with open(log, "w") as out:
            try:
                proc = subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      timeout=limit + 0.5)
            except subprocess.TimeoutExpired:
                return RunResult("none")
        text = Path(log).read_text(errors="replace")
        if proc.returncode != 0 or not Path(sol).exists():
            return RunResult("none", bound=_cbc_log_bound(text))
        status, values, *_, sol_status = solver.readsol_MPS(sol, prob, variables, var_names, con_names)
    prob.assignVarsVals(values)
    prob.assignStatus(status, sol_status)  # PuLP's view, kept for callers who look at it
    if sol_status == pulp.LpSolutionInfeasible or status == pulp.LpStatusInfeasible:
        return RunResult("infeasible")
    if sol_status not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        return RunResult("none", bound=_cbc_log_bound(text))
    assert model.objective is not None
    objective = values[model.objective.name]
    if sol_status == pulp.LpSolutionOptimal:
        return RunResult("optimal", objective, objective, values)
    return RunResult("feasible", objective, _cbc_log_bound(text), values)


def _cbc_log_bound(log: str) -> float | None:
    match = re.search(r"^Lower bound:\s*(-?[0-9.eE+-]+)", log, re.MULTILINE)
    if not match:
        return None
    text = match.group(1)
    decimals = len(text.split(".")[1]) if "." in text and "e" not in text.lower() else 6
    return float(text) - 10.0 ** (-decimals)


def highs_available() -> bool:
    """True when ``highspy`` can be imported (checked without importing it here)."""
    return importlib.util.find_spec("highspy") is not None


def run_highs(model: IlpModel, time_limit: float, start: Mapping[str, float] | None) -> RunResult:
    """HiGHS on the model's MPS in a subprocess (:mod:`.highs_worker` says why)."""
    if not highs_available():
        raise NotApplicableError("options.backend 'highs' needs the highspy package: pip install 'pipesched[highs]'")
    with tempfile.TemporaryDirectory(prefix="pipesched-highs-") as tmp:
        mps, out, req = (str(Path(tmp) / name) for name in ("model.mps", "answer.json", "request.json"))
        model.prob.writeMPS(mps)
        with open(req, "w") as f:
            json.dump({"mps": mps, "out": out, "time_limit": max(0.05, time_limit), "start": dict(start or {})}, f)
        try:
            proc = subprocess.run(
                [sys.executable, str(_HIGHS_SCRIPT), req], capture_output=True, text=True, timeout=time_limit + 3
            )
        except subprocess.TimeoutExpired:  # HiGHS ignored its own time limit: keep the warm start
            return RunResult("none")
        if proc.returncode != 0 or not Path(out).exists():
            raise RuntimeError(f"HiGHS subprocess failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
        with open(out) as f:
            answer = json.load(f)
    return RunResult(answer["status"], answer["objective"], answer["bound"], answer["values"])

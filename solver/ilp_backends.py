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
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .errors import NotApplicableError
from .ilp_model import IlpModel, pulp

_HIGHS_SCRIPT = Path(__file__).with_name("ilp_highs.py")


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
    """CBC through PuLP. ``sol_status`` separates proven optimum from stopped-on-time.

    The best bound of an unfinished run is read from CBC's log ("Lower bound: ..."), rounded
    down by its last printed digit so it stays a valid bound. MIP preprocessing is off: the CBC
    bundled with PuLP segfaults when its time runs out inside preprocessing with a MIP start,
    and on these models it did not pay for itself anyway. A crash still leaves the warm start.
    """
    try:
        return _cbc_once(model, time_limit, warm, ["preprocess off"])
    except pulp.PulpSolverError:
        return RunResult("none")


def _cbc_once(model: IlpModel, time_limit: float, warm: bool, options: list[str]) -> RunResult:
    with tempfile.TemporaryDirectory(prefix="pipesched-cbc-") as tmp:
        log = Path(tmp) / "cbc.log"
        solver = cbc_solver(
            msg=False, timeLimit=max(0.05, time_limit), warmStart=warm, logPath=str(log), gapRel=0.0,
            timeMode="elapsed", threads=1, options=options,
        )
        model.prob.solve(solver)
        text = log.read_text(errors="replace") if log.exists() else ""
    sol = model.prob.sol_status
    if sol == pulp.LpSolutionInfeasible or model.prob.status == pulp.LpStatusInfeasible:
        return RunResult("infeasible")
    if sol not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        return RunResult("none", bound=_cbc_log_bound(text))
    values = {v.name: v.value() for v in model.prob.variables() if v.value() is not None}
    objective = pulp.value(model.prob.objective)
    if sol == pulp.LpSolutionOptimal:
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
    """HiGHS on the model's MPS in a subprocess (:mod:`pipesched.solver.ilp_highs` says why)."""
    if not highs_available():
        raise NotApplicableError("options.backend 'highs' needs the highspy package: pip install 'pipesched[highs]'")
    with tempfile.TemporaryDirectory(prefix="pipesched-highs-") as tmp:
        mps, out, req = (str(Path(tmp) / name) for name in ("model.mps", "answer.json", "request.json"))
        model.prob.writeMPS(mps)
        with open(req, "w") as f:
            json.dump({"mps": mps, "out": out, "time_limit": max(0.05, time_limit), "start": dict(start or {})}, f)
        try:
            proc = subprocess.run(
                [sys.executable, str(_HIGHS_SCRIPT), req], capture_output=True, text=True, timeout=time_limit + 30
            )
        except subprocess.TimeoutExpired:  # HiGHS ignored its own time limit: keep the warm start
            return RunResult("none")
        if proc.returncode != 0 or not Path(out).exists():
            raise RuntimeError(f"HiGHS subprocess failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
        with open(out) as f:
            answer = json.load(f)
    return RunResult(answer["status"], answer["objective"], answer["bound"], answer["values"])

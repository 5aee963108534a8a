"""Solve one MPS model with HiGHS, in a process of its own.

``highspy`` and ``ortools`` cannot live in one Python process (importing the second fails with
an undefined symbol, in either order), and the ILP method runs next to CP-SAT. So the method
writes its model as MPS and runs this file as a script (``python highs_worker.py REQUEST.json``),
which imports nothing but the standard library and ``highspy``. It is run by path, not with
``-m``, so no package ``__init__`` (which might import OR-Tools one day) is executed.

Request JSON: ``{"mps": path, "out": path, "time_limit": s, "start": {column: value} | null}``.
Answer JSON written to ``out``: ``{"status": "optimal"|"feasible"|"infeasible"|"none",
"objective": float|null, "bound": float|null, "values": {column: value}}``.
"""

from __future__ import annotations

import json
import sys


def solve(request: dict) -> dict:
    """Run HiGHS single-threaded with a fixed seed (deterministic) and report what it proved."""
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    h.setOptionValue("random_seed", 0)
    h.setOptionValue("mip_rel_gap", 0.0)
    h.setOptionValue("time_limit", float(request["time_limit"]))
    h.readModel(request["mps"])
    names = list(h.getLp().col_names_)
    start = request.get("start")
    if start:
        sol = highspy.HighsSolution()
        sol.col_value = [float(start.get(n, 0.0)) for n in names]
        sol.value_valid = True
        h.setSolution(sol)
    h.run()
    model_status = h.getModelStatus()
    info = h.getInfo()
    has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
    statuses = highspy.HighsModelStatus
    if model_status == statuses.kOptimal and has_solution:
        status = "optimal"
    elif model_status == statuses.kInfeasible:
        status = "infeasible"
    else:
        status = "feasible" if has_solution else "none"
    values = dict(zip(names, h.getSolution().col_value, strict=True)) if has_solution else {}
    bound = info.mip_dual_bound
    return {
        "status": status,
        "objective": info.objective_function_value if has_solution else None,
        "bound": bound if bound == bound and abs(bound) < 1e300 else None,
        "values": values,
    }


def main(argv: list[str]) -> int:
    with open(argv[1]) as f:
        request = json.load(f)
    answer = solve(request)
    with open(request["out"], "w") as f:
        json.dump(answer, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

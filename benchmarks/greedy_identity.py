"""Method ``greedy``'s answers on a broad corpus, one hash per (case, policy), to prove a refactor changes none.

Every policy's order and start times (``greedy_schedule``) and the method's final schedule (its ops,
makespan and objective) are hashed per case. Run ``python benchmarks/greedy_identity.py OUT`` at two
commits and ``python benchmarks/greedy_identity.py --diff A B`` to count the cases that differ. The
corpus: the drawn cases of ``benchmarks/cases.py`` (``tuning()``, ``development()``) and a grid of
small problems over placement (loop v = 1, 2, 4; V; dual), fused or split backward, memory caps
(none, tight, heterogeneous), comm, zero-length ops, per-stage costs and both objectives.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from pipesched.solver import Instance, Problem, solve
from pipesched.solver.core.errors import NotApplicableError
from pipesched.solver.heuristics.greedy import POLICIES, greedy_schedule

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import development, tuning  # noqa: E402


def grid() -> Iterator[tuple[str, Problem]]:
    """Small problems across the features greedy handles (names say which)."""
    layouts = [("loop", 1), ("loop", 2), ("loop", 4), ("v", 2), ("dual", 2)]
    for (placement, v), p, m, split, comm, costs, limit, objective in itertools.product(
            layouts, (2, 4), (4, 9), (True, False), (0.0, 0.3), ("unit", "stage", "zero"),
            ("none", "tight", "mid", "hetero"), ("makespan", "stage_span")):
        S = p if placement == "dual" else p * v  # dual: one cost per model stage, shared by both copies
        per = {"unit": (1.0, 1.0, 1.0), "stage": None, "zero": (1.0, 0.0, 1.0)}[costs]
        if per is None:
            fwd = [1.0 + 0.25 * (s % 3) for s in range(S)]
            cost = {"forward": fwd, "backward_input": [1.5 * f for f in fwd], "backward_weight": [0.5 + 0.5 * (s % 2) for s in range(S)]}
        else:
            cost = {"forward": per[0], "backward_input": per[1], "backward_weight": per[2]}
        cost["comm"] = comm
        cap = {"none": None, "tight": float(v if placement != "v" else 2), "mid": float(p * v) / 2 + 1,
               "hetero": [float(max(2 * v, p - d + v)) for d in range(p)]}[limit]
        kwargs = {"dual_split": m // 2} if placement == "dual" else {}
        problem = Problem(devices=p, microbatches=m, stages_per_device=v, placement=placement,
                          split_backward=split, costs=cost, memory={"limit": cap}, objective=objective, **kwargs)
        yield f"{placement}{v} p{p} m{m} split={split} comm={comm} {costs} {limit} {objective}", problem


def corpus() -> Iterator[tuple[str, Problem]]:
    for case in tuning() + development():
        yield f"drawn {case.name}", case.problem
    yield from grid()


def digest(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def answers(problem: Problem) -> dict[str, str]:
    """One hash per policy (order and start times, or the error) and one for the method's schedule."""
    out: dict[str, str] = {}
    try:
        inst = Instance.from_problem(problem)
    except (NotApplicableError, ValueError) as err:
        return {"instance": f"error {err}"}
    for name in POLICIES:
        try:
            order, start = greedy_schedule(inst, policy=name)
            out[name] = digest([[[op.kind, op.stage, op.microbatch, start[op]] for op in ops] for ops in order])
        except NotApplicableError as err:
            out[name] = f"error {err}"
    sched = solve(problem, "greedy")
    ops = sorted((o.device, o.start, o.end, o.kind, o.stage, o.microbatch) for o in sched.ops)
    out["method"] = digest([sched.status, sched.reason, sched.makespan, sched.objective_value, ops])
    return out


def main(argv: list[str]) -> int:
    if argv[:1] == ["--diff"]:
        a, b = (json.loads(Path(x).read_text()) for x in argv[1:3])
        keys = sorted(set(a) | set(b))
        differ = [k for k in keys if a.get(k) != b.get(k)]
        answers_n = sum(len(v) for v in a.values())
        changed = sum(1 for k in differ for n in set(a.get(k, {})) | set(b.get(k, {}))
                      if a.get(k, {}).get(n) != b.get(k, {}).get(n))
        print(f"{len(keys)} cases, {answers_n} answers; {len(differ)} cases and {changed} answers differ")
        for k in differ[:20]:
            print("  differs:", k)
        return 1 if differ else 0
    result = {name: answers(problem) for name, problem in corpus()}
    Path(argv[0]).write_text(json.dumps(result, indent=0, sort_keys=True))
    print(f"{len(result)} cases written to {argv[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

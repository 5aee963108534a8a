"""Brute force over every split and recompute choice of a tiny model: what the plan bound must stay under."""

from __future__ import annotations

import itertools
import random

from pipesched.solver import Instance, Problem, SolveOptions, solve
from pipesched.solver.bounds.combinatorial import combinatorial_bound
from pipesched.solver.core.canonical import problem_key
from pipesched.solver.planning import Cluster, Model
from pipesched.solver.planning.induce import InfeasibleSplit, Split, induce
from pipesched.solver.planning.sums import recompute_order


def head_heavy_model(rng: random.Random, n: int, varied_outputs: bool = False) -> Model:
    """Blocks that may recompute (their activations shrink, B re-runs F) and a heavy last layer;
    ``varied_outputs``: each block sends its own size (boundaries then lag differently)."""
    layers = [{"name": f"b{k}", "forward": 1, "backward_input": 1, "backward_weight": rng.choice([0, 1]),
               "memory": {"forward": 2, "backward_input": -1, "backward_weight": -1}, "static": 1,
               "output": rng.choice([0.5, 1.0, 4.0]) if varied_outputs else 1.0,
               "recompute": {"memory": {"forward": 0.5, "backward_input": 0.5, "backward_weight": -1}}}
              for k in range(n - 1)]
    layers.append({"name": "head", "forward": 3, "backward_input": 3, "backward_weight": 2,
                   "memory": {"forward": 3, "backward_input": -2, "backward_weight": -1}, "static": 2})
    return Model.model_validate({"layers": layers})


def recompute_choices(layers: list, bounds: list[int]) -> list[Split]:
    """Every per-layer recompute choice of a split of layers that differ only in kind: per stage, how
    many of its recomputable layers are recomputed (which of them is immaterial for identical blocks)."""
    ranges = [range(len(recompute_order(layers, bounds[s], bounds[s + 1])) + 1) for s in range(len(bounds) - 1)]
    return [Split.of(bounds, [c > 0 for c in counts], list(counts)) for counts in itertools.product(*ranges)]


def _problems(model: Model, cluster: Cluster, m: int, drop_transients: bool
              ) -> list[tuple[tuple[int, ...], Split, Problem | None]]:
    """(split bounds, split, its Problem or None when it does not fit) for every split and recompute choice."""
    layers, out = model.expanded(), []
    for cuts in itertools.combinations(range(1, len(layers)), cluster.num_stages - 1):
        bounds = (0, *cuts, len(layers))
        for split in recompute_choices(layers, list(bounds)):
            try:
                problem = induce(layers, cluster, split, m)
            except InfeasibleSplit:
                out.append((bounds, split, None))
                continue
            if drop_transients and problem.memory is not None:
                data = problem.model_dump()
                data["memory"]["backward_input_transient"] = 0.0
                problem = Problem.model_validate(data)
            out.append((bounds, split, problem))
    return out


def _proven(problem: Problem, split: Split, proven_only: bool) -> float:
    """The optimum CP-SAT proves, or where it proves none the bound it proves (below the optimum: a
    stricter test); inf when infeasible."""
    schedule = solve(problem, "cpsat", SolveOptions(time_limit_s=20))
    if proven_only:
        assert schedule.status in ("optimal", "infeasible"), (split.bounds, split.partial, schedule.status)
    if schedule.status == "infeasible":
        return float("inf")
    proven = schedule.objective_value if schedule.status == "optimal" else schedule.lower_bound
    assert proven is not None, (split.bounds, split.partial, schedule.status)
    return proven


def best_per_split(model: Model, cluster: Cluster, m: int, *, drop_transients: bool = False,
                   proven_only: bool = False) -> dict[tuple[int, ...], float]:
    """For every split (its bounds), the least over every per-layer recompute choice that fits memory
    of the optimum, or where CP-SAT does not prove it, of the bound it proves; inf when no choice fits.
    ``drop_transients``: each Problem without the recompute transient (a relaxation, and one CP-SAT
    proves); ``proven_only``: every Problem must be proven optimal or infeasible."""
    out: dict[tuple[int, ...], float] = {}
    known: dict[str, float] = {}
    for bounds, split, problem in _problems(model, cluster, m, drop_transients):
        out.setdefault(bounds, float("inf"))
        if problem is not None:
            key = problem_key(problem)
            if key not in known:
                known[key] = _proven(problem, split, proven_only)
            out[bounds] = min(out[bounds], known[key])
    return out


def best_overall(model: Model, cluster: Cluster, m: int, *, drop_transients: bool = False,
                 proven_only: bool = False) -> float:
    """The least value :func:`best_per_split` would give, by branch and bound: Problems in order of their
    closed-form lower bound, and none solved once that bound reaches the best found (it cannot beat it),
    so the minimum is exact with a fraction of the solves."""
    candidates = {}
    for _, split, problem in _problems(model, cluster, m, drop_transients):
        if problem is not None:
            candidates.setdefault(problem_key(problem), (split, problem))
    ranked = sorted(((combinatorial_bound(Instance.from_problem(p).relaxed()), split, p)
                     for split, p in candidates.values()), key=lambda x: x[0])
    best = float("inf")
    for floor, split, problem in ranked:
        if floor >= best:
            break
        best = min(best, _proven(problem, split, proven_only))
    return best


def best_over_splits_and_recompute(model: Model, cluster: Cluster, m: int) -> float:
    """min over every split and every per-layer recompute choice that fits memory of the optimum (or
    the bound CP-SAT proves where it does not prove one)."""
    return best_overall(model, cluster, m)


def best_without_transients(model: Model, cluster: Cluster, m: int, *, proven_only: bool = True) -> float:
    """min over every split and per-layer recompute choice of the optimum CP-SAT proves for its Problem
    with the recompute transient dropped: a relaxation (the transient only adds memory while a B runs),
    so never above the true best, and one CP-SAT proves (with a transient the methods keep the largest
    back and prove nothing). ``proven_only``: every Problem must be proven optimal or infeasible; else
    an unproven one counts with the bound CP-SAT proves (below its optimum: a stricter test)."""
    return best_overall(model, cluster, m, drop_transients=True, proven_only=proven_only)

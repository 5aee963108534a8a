"""What each phase of a solve costs per op, against the figure the budget charges for it.

The portfolio sizes every phase from the nominal time limit with the per-op costs of
``solver/budget/per_op.py``, one field a phase, named as this script names its measurement; those
figures are idle-core measurements rounded up, about doubled for a shared machine. This re-measures
each one (CPU seconds, best of three, so the load of the machine enters as little as it can) on a few
shapes and prints the charged figure beside the largest measurement and their ratio: a ratio below 1
means the budget under-charges that phase and a solve may overrun its limit.

    python benchmarks/phase_costs.py [--out benchmarks/results/phase_costs.md]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pipesched.solver import Instance, Problem, SolveOptions, methods
from pipesched.solver import budget as B
from pipesched.solver.core.errors import NotApplicableError
from pipesched.solver.core.method import Method
from pipesched.solver.exact.cpsat.formulation import CpsatModel, OpGraph, build
from pipesched.solver.exact.cpsat.relaxations import contracted_graph
from pipesched.solver.exact.cpsat.run import horizon_value, model_lower
from pipesched.solver.exact.cpsat.scaling import Scaling
from pipesched.solver.heuristics.interleaved_memory import POLICIES as IL_POLICIES
from pipesched.solver.heuristics.interleaved_memory import applies as il_applies
from pipesched.solver.heuristics.interleaved_memory import interleaved_candidates
from pipesched.solver.heuristics.trials import Trials
from pipesched.solver.heuristics.v_memory import POLICIES as VM_POLICIES
from pipesched.solver.heuristics.v_memory import WIDE_GRID, vm_candidates
from pipesched.solver.heuristics.v_memory import _policy_orders as v_policy_orders
from pipesched.solver.heuristics.v_memory import applies as vm_applies
from pipesched.solver.heuristics.warm_start import first_schedule
from pipesched.solver.heuristics.zb_auto import zb_auto_candidates
from pipesched.solver.heuristics.zbv_greedy import zbv_candidates
from pipesched.solver.heuristics.zero_bubble import zb_candidates
from pipesched.solver.timing.finalize import finalize
from pipesched.solver.timing.retime import Incumbent, compact, retime
from pipesched.solver.timing.simulate import simulate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import command_line, publish  # noqa: E402

#: Zero-bubble paper 14.6B-like costs, a cap of 1.5 p microbatches (the shapes the tuning set has).
COSTS = {"forward": 11.3, "backward_input": 11.2, "backward_weight": 8.1, "comm": 0.38}


def _problem(p: int, m: int, v: int, placement: str, objective: str = "makespan") -> Problem:
    return Problem(devices=p, microbatches=m, stages_per_device=v, placement=placement, objective=objective,
                   costs={k: x / v if k != "comm" else x for k, x in COSTS.items()},
                   memory={"forward": 1.0 / v, "backward_input": 0.0, "backward_weight": -1.0 / v,
                           "limit": 1.5 * p / v})


#: Every field of :class:`pipesched.solver.budget.PerOpCosts`: each is measured on at least one shape
#: (``tests/solver/test_phase_costs_fields.py`` checks that ``measure`` names each and nothing else).
MEASURED_FIELDS = tuple(f.name for f in dataclasses.fields(B.PerOpCosts))

SHAPES = {
    "loop v1 p8 m32 span": _problem(8, 32, 1, "loop", "stage_span"),
    "loop v2 p8 m32": _problem(8, 32, 2, "loop"),
    "V p8 m32": _problem(8, 32, 2, "v"),
    "loop v2 p16 m64": _problem(16, 64, 2, "loop"),
}


def cpu(fn: Callable[[], object], repeats: int = 3) -> float:
    """Best CPU seconds of ``repeats`` runs."""
    best = float("inf")
    for _ in range(repeats):
        c0 = time.process_time()
        fn()
        best = min(best, time.process_time() - c0)
    return best


def _run_or_refused(method: Method, problem: Problem, options: SolveOptions) -> None:
    """A search that finds no order within the cap refuses after its work: that work is its cost."""
    with contextlib.suppress(NotApplicableError):
        method.run(problem, options)


def measure(problem: Problem) -> dict[str, float]:
    """Seconds per op (per op and policy or trial where the constant is) of every phase that applies."""
    inst = Instance.from_problem(problem)
    n = inst.num_ops
    options = SolveOptions(time_limit_s=10.0, workers=1)
    out: dict[str, float] = {}
    order = next(iter(zb_candidates(inst, None, keep=1))).order
    uncapped = problem.model_copy(update={"memory": problem.memory.model_copy(update={"limit": None})})
    fixed = [m for m in methods() if m.role == "recipe" and m.applies(problem) is None]
    searches = [m for m in methods() if m.role == "search" and m.applies(problem) is None and m.name != "v-memory"]
    # a recipe over the cap is refused after its work: time each where it is not
    out["fixed_recipe"] = max(cpu(lambda m=m: m.run(uncapped, options)) for m in fixed) / n
    out["recipe"] = max(cpu(lambda m=m: _run_or_refused(m, problem, options), 1) for m in searches) / n
    out["compact"] = cpu(lambda: compact(inst, order)) / n
    out["trial"] = cpu(lambda: simulate(inst, order)) / n  # a trial is one re-timing of the order
    if inst.objective == "stage_span" and n <= B.EXACT_TIMING_OPS:
        out["retime"] = cpu(lambda: retime(inst, order), 1) / n
    start = simulate(inst, order)
    out["finalize"] = cpu(lambda: finalize(problem, "x", start, inst=inst)) / n
    out["setup"] = cpu(lambda: first_schedule(problem, inst, "x", 0.0, time.perf_counter()), 1) / n
    sc = Scaling.of(inst)
    objective = Incumbent.of(inst, order).objective

    def model(graph: OpGraph) -> CpsatModel:
        return build(inst, sc, graph, horizon=horizon_value(inst, sc, objective), lower=model_lower(inst, sc, 0.0),
                     upper=sc.up(objective) + 1)

    out["build"] = cpu(lambda: model(OpGraph.full(inst, sc)), 1) / n
    first_last = [0] if inst.devices == 1 else [0, inst.devices - 1]  # the devices relaxation_bound models
    out["relax"] = cpu(lambda: [model(contracted_graph(inst, sc, d)) for d in first_last], 1) / n
    count = 8
    grid = cpu(lambda: zb_candidates(inst, count * n / B.GRID_OPS_PER_SECOND), 1)
    out["GRID_OPS_PER_SECOND"] = count * n / grid if grid > 0 else float("inf")
    if il_applies(inst):
        out["interleaved_memory"] = cpu(lambda: interleaved_candidates(inst, keep=1), 1) / (n * len(IL_POLICIES))
        trials = Trials(50)
        spent = cpu(lambda: interleaved_candidates(inst, keep=1, trials=trials), 1)
        used = 50 - trials.left
        if used:
            out["interleaved_trial"] = (spent - out["interleaved_memory"] * n * len(IL_POLICIES)) / (n * used)
    if inst.placement == "loop" and inst.stages_per_device == 1 and inst.split_backward:
        out["zb_auto"] = cpu(lambda: zb_auto_candidates(inst, keep=1), 1) / n
    if inst.placement == "v" and inst.split_backward:
        out["zbv"] = cpu(lambda: zbv_candidates(inst, keep=1), 1) / n
        out["zbv_large"] = cpu(lambda: zbv_candidates(inst, keep=1, full=False), 1) / n
    if vm_applies(inst):
        out["v_memory"] = cpu(lambda: vm_candidates(inst, keep=1, trials=0), 1) / (n * (len(VM_POLICIES) + 2))
        out["v_wide"] = cpu(lambda: list(v_policy_orders(inst, WIDE_GRID[:16], float("inf"), "wide")), 1) / (n * 16)
    return out


#: Constants charged as seconds: measured must be at most the constant. GRID_OPS_PER_SECOND is a rate.
RATES = ("GRID_OPS_PER_SECOND",)


def charged_for(name: str) -> float:
    """What the budget charges for a measured phase: a field of ``PER_OP``, or a budget constant by name.
    finalize is charged with the policy margin ``FINISH_S_PER_OP`` on top (:func:`budget.finish_margin`)."""
    if name == "finalize":
        return B.PER_OP.finalize + B.FINISH_S_PER_OP
    if name in MEASURED_FIELDS:
        return float(getattr(B.PER_OP, name))
    return float(getattr(B, name))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "phase_costs.md")
    args = parser.parse_args(argv)
    worst: dict[str, tuple[float, str]] = {}
    for name, problem in SHAPES.items():
        for constant, value in measure(problem).items():
            bad = value < worst[constant][0] if constant in RATES and constant in worst else (
                constant not in worst or value > worst[constant][0])
            if bad:
                worst[constant] = (value, name)
    rows = ["| constant | charged | measured (worst shape, CPU) | shape | charged / measured |", "|---|---|---|---|---|"]
    for constant in sorted(worst):
        value, shape = worst[constant]
        charged = charged_for(constant)
        ratio = value / charged if constant in RATES else charged / value if value > 0 else float("inf")
        rows.append(f"| `{constant}` | {charged:.3g} | {value:.3g} | {shape} | {ratio:.2f} |")
    text = "\n".join([
        "# Phase costs: what the budget charges per op against a measurement",
        "",
        f"`{command_line('phase_costs.py', argv)}`. CPU seconds per op (per op and policy or trial where the "
        "constant says so), best of three, the largest over the shapes; for the grid's rate, op-policies per second, "
        "the smallest. A ratio below 1: the budget under-charges that phase.",
        "",
        *rows,
        "",
    ])
    publish(text, args.out)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

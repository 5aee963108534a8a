"""The step a data-parallel job pays: plans that know the gradient sync against plans that do not.

A step ends when the slowest device has synchronised its stages' gradients over the data-parallel group
and stepped its optimizer (``costs.grad_sync``, ``costs.optimizer``; the planner fills them from
``Cluster.data_parallel`` and ``memory_bandwidth``). For each case:

- **aware**: ``plan()`` on the cluster with the tail (the objective is the step's end);
- **blind**: ``plan()`` on the same cluster without it (the step ends at the last pipeline op), its
  split and schedule order then timed with the tail: what a sync-blind planner's answer costs;
- **recipe**: the best fixed recipe (1F1B, ZB-H1/H2, interleaved 1F1B, ZB-V, ...) on the aware plan's
  split, timed with the tail.

Each column gives the step (ms) and its exposed part, step end minus pipeline end (the syncs and the
optimizer step that no compute hides). ``half`` says whether the aware plan exposes at most half of what
the blind one does. ``floor`` is what any schedule of the aware plan's split must expose: the last op ends
on some device, is its stage's last W, so at least that device's smallest sync and its optimizer step
follow it (the least of that over devices); where half the blind exposure is below the floor, halving
it cannot be done (``half`` then says "floor").

Models (costs of ``pipesched model transformer`` / ``model hf`` on H100s, 4k sequences, one per microbatch,
Adam, bf16, ZeRO-1 over the data-parallel ranks): Llama-3-8B-shaped (tp 1: 8 pipeline devices in one
node), 70B-shaped (tp 8: each pipeline device a node of its own, 4 of them) and Qwen3-30B-A3B (8-way
expert parallelism); data parallelism 8 and 64 (InfiniBand between nodes); loop v = 1, loop v = 2 and V.

    python benchmarks/step.py [--time-limit 10] [--quick]     # writes benchmarks/results/step.md
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from pipesched.solver import Instance, Problem, SolveOptions, methods, solve
from pipesched.solver.costmodel import (
    DEVICES,
    TransformerConfig,
    default_cluster,
    transformer_model,
)
from pipesched.solver.costmodel.hf_config import load_config
from pipesched.solver.costmodel.hf_model import hf_model, run_config
from pipesched.solver.planning import Cluster, Model, Split, induce
from pipesched.solver.planning.plan import Plan
from pipesched.solver.planning.planner import plan
from pipesched.solver.timing.finalize import from_order

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import command_line, publish  # noqa: E402

OUT = Path(__file__).parent / "results" / "step.md"
HF = Path(__file__).resolve().parents[1] / "examples" / "hf"
SHAPES = {
    "8B": dict(hidden=4096, layers=32, heads=32, kv_heads=8, ffn=14336, vocab=128_256, tp=1),
    "70B": dict(hidden=8192, layers=80, heads=64, kv_heads=8, ffn=28672, vocab=128_256, tp=8),
}


@dataclass(frozen=True)
class Case:
    model: str  # a SHAPES key or "qwen3_30b_a3b"
    devices: int
    dp: int
    v: int
    placement: str

    @property
    def name(self) -> str:
        where = "loop v1" if self.v == 1 else f"{self.placement} v{self.v}"
        return f"{self.model} p{self.devices} dp{self.dp} {where}"


def cases(quick: bool) -> list[Case]:
    shapes = [("8B", 8), ("70B", 4), ("qwen3_30b_a3b", 8)]
    placements = [(1, "loop"), (2, "loop"), (2, "v")]
    dps = [8] if quick else [8, 64]
    return [Case(m, p, dp, v, pl) for m, p in shapes for dp in dps for v, pl in placements
            if not (quick and m == "70B")]


def build(case: Case) -> tuple[Model, Cluster]:
    device = DEVICES["h100"]
    if case.model in SHAPES:
        config = TransformerConfig(seq=4096, microbatch_size=1, dp=case.dp, zero=1, **SHAPES[case.model])
        model = transformer_model(config, device)
    else:
        arch = load_config(HF / f"{case.model}.json")
        config = run_config(arch, seq=4096, microbatch_size=1, dp=case.dp, zero=1)
        model = hf_model(arch, config, device, ep=8)
    cluster = default_cluster(config, device, devices=case.devices, microbatches=4 * case.devices,
                              stages_per_device=case.v, placement=case.placement)  # type: ignore[arg-type]
    return model, cluster


def split_of(found: Plan) -> Split:
    """The split a plan chose, from its stages."""
    bounds = [found.stages[0].layers[0], *(st.layers[1] for st in found.stages)]
    counts = [len(st.recompute_layers) if st.recompute and st.recompute_layers is not None else None
              for st in found.stages]
    return Split.of(bounds, [st.recompute for st in found.stages], counts)


def exposed(schedule: object) -> tuple[float, float]:
    step, pipe = schedule.step_end, schedule.pipeline_end  # type: ignore[attr-defined]
    return step, step - pipe


def best_recipe(problem: Problem) -> tuple[str, float, float] | None:
    best = None
    for m in methods():
        if m.role != "recipe" or m.applies(problem):
            continue
        try:
            schedule = solve(problem, m.name, SolveOptions(time_limit_s=1.0))
        except Exception:  # noqa: BLE001 - a recipe over the memory cap refuses the problem
            continue
        if schedule.ops and (best is None or schedule.objective_value < best[1]):
            best = (m.name, *exposed(schedule))
    return best


def run(case: Case, limit: float) -> dict[str, object]:
    model, cluster = build(case)
    aware = plan(model, cluster, "auto", limit)
    blind_cluster = cluster.model_copy(update={"data_parallel": None, "memory_bandwidth": None})
    blind = plan(model, blind_cluster, "auto", limit)
    assert aware.schedule is not None and blind.schedule is not None, case.name
    layers = model.expanded()
    timed = from_order(induce(layers, cluster, split_of(blind), blind.microbatches, model.units), "blind",
                       blind.schedule.order())
    problem = induce(layers, cluster, split_of(aware), aware.microbatches, model.units)
    recipe = best_recipe(problem)
    inst = Instance.from_problem(problem)
    floor = min(min(inst.sync[s] for s in stages) + inst.optimizer[d] for d, stages in enumerate(inst.stages_of_device))
    a_step, a_exp = exposed(aware.schedule)
    b_step, b_exp = exposed(timed)
    return {"case": case.name, "v": case.v, "aware_step": a_step, "aware_exposed": a_exp,
            "aware_status": aware.schedule.status, "blind_step": b_step, "blind_exposed": b_exp,
            "recipe": recipe[0] if recipe else None, "recipe_step": recipe[1] if recipe else None,
            "recipe_exposed": recipe[2] if recipe else None,
            "floor": floor, "half": a_exp <= 0.5 * b_exp + 1e-9, "halvable": 0.5 * b_exp >= floor - 1e-9}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds per plan() call")
    parser.add_argument("--quick", action="store_true", help="dp 8 only, no 70B")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    rows = []
    for case in cases(args.quick):
        r = run(case, args.time_limit)
        rows.append(r)
        print(r, flush=True)

    def ms(x: object) -> str:
        return "–" if x is None else f"{x:.1f}"

    table = ["| case | aware step | aware exposed | blind step | blind exposed | best recipe | recipe step | "
             "recipe exposed | floor | half | aware status |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        half = "yes" if r["half"] else ("no" if r["halvable"] else "floor")
        table.append(f"| {r['case']} | {ms(r['aware_step'])} | {ms(r['aware_exposed'])} | {ms(r['blind_step'])} | "
                     f"{ms(r['blind_exposed'])} | {r['recipe'] or '–'} | {ms(r['recipe_step'])} | "
                     f"{ms(r['recipe_exposed'])} | {ms(r['floor'])} | {half} | {r['aware_status']} |")
    never_longer = sum(r["aware_step"] <= r["blind_step"] + 1e-6 for r in rows)
    multi = [r for r in rows if r["v"] >= 2]
    halved = sum(bool(r["half"]) for r in multi)
    floored = sum(not r["half"] and not r["halvable"] for r in multi)
    text = "\n".join([
        "# The step a data-parallel job pays: sync-aware plans against sync-blind ones",
        "",
        f"`{command_line('step.py', argv)}`. Steps and exposed parts in ms (exposed = step end − pipeline end).",
        "",
        *table,
        "",
        f"- aware step never longer than the blind plan timed with the sync: {never_longer} of {len(rows)}",
        f"- v >= 2: aware exposes at most half of the blind plan's exposure: {halved} of {len(multi)}; "
        f"the floor rules it out on {floored} more",
        "",
    ])
    publish(text, args.out)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

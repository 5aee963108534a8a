"""Planning a whole model against the hand rules (issue 10): split + recompute + schedule.

Cases are decoder-only transformers shaped like Llama-3 8B (h 4096, 32 layers, 32 heads, 8 KV heads,
FFN 14336) and 70B (h 8192, 80 layers, 64 / 8 heads, FFN 28672, tensor parallel 8), and a 16-layer
small model (h 2048, 16 heads, 4 KV heads, FFN 5632), with vocabularies of 32k and 128k and sequences of
4k and 8k, built by ``pipesched.solver.costmodel.transformer_model`` on H100s (one sequence per
microbatch; ms, GiB). Memory per device is the H100's 80 GiB, or for the ``tight`` cases 80% of what the
uniform split's fullest device would need without recomputation (the 1F1B in-flight estimate of
``pipesched.solver.planning.split``), so something must be recomputed.

Two mixture-of-experts models come from their published Hugging Face configs (``examples/hf``, read by
``pipesched model hf``): DeepSeek-V3 on 16 pipeline devices as its technical report trained it (no tensor
parallelism, 64-way expert parallelism spanning 8 nodes, ZeRO-1 over 128 data-parallel ranks; H800s,
here the H100 preset of the same compute; 4k sequences), once with loop placement and once with V
placement (where DualPipe-V pairs F and B and the all-to-all's ``costs.overlap_fb`` counts), and
Qwen3-30B-A3B on 8 (8-way expert parallelism inside one node, ZeRO-1 over 8 ranks: an assumed setup).
Their Megatron layout and torchtitan module names are listed under the table.

Every split (the plan's candidates and the baselines: uniform, torchtitan's rule, Megatron's first/last
rule, the AdaPipe-style DP) is scheduled by the same method with the same time share inside one
``plan()`` call of ``--time-limit`` seconds. Columns: step times (ms); ``imbal.`` the uniform split's
heaviest device work over the mean, minus 1; ``vs unif.`` / ``vs AdaPipe`` the plan's saving;
``rc`` stages recomputed (plan, with its recomputed layers in brackets: per-layer recompute / AdaPipe-style,
whole stages); ``gap`` to the plan's lower bound over all splits;
``ok`` the plan's schedule validates and every device's static + activations + transient fits;
``time s`` with ``*``: the planner's wall-clock net stopped the search before its nominal budget
(``Plan.wall_cut``), with ``†n``: n solves whose method's own net cut them, also when run once more
(``Plan.solves_cut``); the search is otherwise sized in nominal solver seconds and repeats on any load. The uniform target line names the cases
where no split can be 5% faster than uniform: the lower bound over all splits is above 95% of it.

    python benchmarks/plan.py --time-limit 10     # writes benchmarks/results/plan.md
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from pipesched.solver import validate
from pipesched.solver.costmodel import (
    DEVICES,
    TransformerConfig,
    default_cluster,
    transformer_model,
)
from pipesched.solver.costmodel.hf_config import load_config
from pipesched.solver.costmodel.hf_model import hf_model, run_config
from pipesched.solver.planning import Cluster, Model
from pipesched.solver.planning.plan import Plan
from pipesched.solver.planning.planner import plan
from pipesched.solver.planning.split import SplitContext, uniform

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import command_line, publish  # noqa: E402

OUT = Path(__file__).parent / "results" / "plan.md"
HF = Path(__file__).resolve().parents[1] / "examples" / "hf"
TIGHT = 0.8

SHAPES = {
    "small16": dict(hidden=2048, layers=16, heads=16, kv_heads=4, ffn=5632, tp=1),
    "8B": dict(hidden=4096, layers=32, heads=32, kv_heads=8, ffn=14336, tp=1),
    "70B": dict(hidden=8192, layers=80, heads=64, kv_heads=8, ffn=28672, tp=8),
}


@dataclass(frozen=True)
class Case:
    shape: str
    vocab: int
    seq: int
    devices: int
    v: int
    placement: str
    tight: bool
    microbatches: int

    @property
    def name(self) -> str:
        pl = "" if self.v == 1 else f" v={self.v} {self.placement}"
        return (f"{self.shape} V={self.vocab // 1000}k s={self.seq // 1024}k p={self.devices}{pl}"
                f"{' tight' if self.tight else ''}")


@dataclass(frozen=True)
class HfCase:
    """A model from its Hub config: ``ep`` expert-parallel ranks taken from ``dp``, ZeRO-1."""

    label: str
    config: str
    seq: int
    devices: int
    v: int
    placement: str
    microbatches: int
    ep: int
    dp: int
    tight: bool = False

    @property
    def name(self) -> str:
        pl = "" if self.v == 1 else f" v={self.v} {self.placement}"
        return f"{self.label} s={self.seq // 1024}k p={self.devices}{pl} ep={self.ep}"


CASES: list[Case | HfCase] = [
    Case("small16", 32_000, 4096, 4, 1, "loop", False, 16),
    Case("small16", 128_000, 4096, 4, 2, "v", True, 16),
    Case("8B", 128_000, 4096, 8, 1, "loop", False, 32),
    Case("8B", 128_000, 8192, 8, 1, "loop", True, 32),
    Case("8B", 32_000, 8192, 4, 2, "loop", False, 16),
    Case("8B", 128_000, 4096, 4, 2, "v", True, 16),
    Case("70B", 128_000, 4096, 8, 1, "loop", True, 32),
    Case("70B", 128_000, 4096, 16, 1, "loop", False, 32),
    Case("70B", 128_000, 8192, 16, 2, "v", False, 32),
    HfCase("DeepSeek-V3", "deepseek_v3", 4096, 16, 1, "loop", 32, ep=64, dp=128),
    HfCase("DeepSeek-V3", "deepseek_v3", 4096, 16, 2, "v", 32, ep=64, dp=128),
    HfCase("Qwen3-30B-A3B", "qwen3_30b_a3b", 4096, 8, 1, "loop", 32, ep=8, dp=8),
]


def _model(case: Case | HfCase) -> tuple[Model, TransformerConfig]:
    device = DEVICES["h100"]
    if isinstance(case, HfCase):
        arch = load_config(HF / f"{case.config}.json")
        config = run_config(arch, seq=case.seq, microbatch_size=1, dp=case.dp, zero=1)
        return hf_model(arch, config, device, case.ep), config
    config = TransformerConfig(vocab=case.vocab, seq=case.seq, microbatch_size=1, **SHAPES[case.shape])
    return transformer_model(config, device), config


def build(case: Case | HfCase) -> tuple[Model, Cluster, float]:
    """The model, its cluster and the uniform split's imbalance."""
    model, config = _model(case)
    device = DEVICES["h100"]
    cluster = default_cluster(config, device, devices=case.devices, microbatches=case.microbatches,
                              stages_per_device=case.v, placement=case.placement)
    layers = model.expanded()
    ctx = SplitContext.of(layers, cluster.model_copy(update={"memory_per_device": None}), case.microbatches)
    split = uniform(ctx, layers)
    assert split is not None
    b = split.bounds
    work = [0.0] * case.devices
    for s in range(ctx.S):
        work[ctx.device[s]] += ctx.table.work(b[s], b[s + 1])
    imbalance = max(work) / (sum(work) / len(work)) - 1
    if case.tight:
        demand = max(ctx.device_demand(split, d) for d in range(case.devices))
        cluster = cluster.model_copy(update={"memory_per_device": round(TIGHT * demand, 3)})
    return model, cluster, imbalance


def _ms(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f}"


def _pct(a: float | None, b: float | None) -> str:
    return "–" if a is None or b is None else f"{(b - a) / b:+.1%}"


def check(result: Plan) -> bool:
    s = result.schedule
    return (s is not None and not validate(s)
            and all(peak <= result.cluster.memory(d) + 1e-9 for d, peak in enumerate(result.peak_memory)))


def run(time_limit: float, only: str | None, command: str) -> str:
    rows, notes = [], {"best": 0, "unif": [0, 0], "ada": [0, 0], "gap": 0, "ok": 0, "n": 0, "rc": 0, "cut": 0,
             "solves_cut": 0, "beyond": []}
    walls: dict[str, float] = {}
    exports: list[str] = []
    for case in CASES:
        if only and only not in case.name:
            continue
        model, cluster, imbalance = build(case)
        layers = model.expanded()
        t0 = time.perf_counter()
        result = plan(model, cluster, "auto", time_limit_s=time_limit)
        wall = time.perf_counter() - t0
        walls[case.name] = wall
        base = {b.name: b for b in result.baselines}
        steps = {k: base[k].step_time for k in ("uniform", "torchtitan", "megatron", "adapipe")}
        best = min((x for x in steps.values() if x is not None), default=None)
        rc = sum(st.recompute for st in result.stages)
        rc_layers = sum(len(st.recompute_layers) if st.recompute_layers is not None else
                        sum(layers[k].recompute is not None for k in range(*st.layers))
                        for st in result.stages if st.recompute)
        rc_ada = sum(st.recompute for st in base["adapipe"].stages)
        ok = check(result)
        gap = result.gap
        notes["n"] += 1
        notes["ok"] += ok
        notes["cut"] += result.wall_cut
        notes["solves_cut"] += result.solves_cut > 0
        notes["rc"] += rc > 0 or rc_ada > 0
        notes["best"] += best is None or (result.step_time is not None and result.step_time <= best + 1e-9)
        if imbalance > 0.10:
            notes["unif"][1] += 1
            u = steps["uniform"]
            met = u is None or (result.step_time or 0) <= 0.95 * u
            notes["unif"][0] += met
            if not met and result.lower_bound is not None and result.lower_bound > 0.95 * u:
                notes["beyond"].append(f"{case.name} (uniform {u:.1f}, bound {result.lower_bound:.1f})")
        if case.tight:
            notes["ada"][1] += 1
            a = steps["adapipe"]
            notes["ada"][0] += a is None or (result.step_time or 0) < a
        notes["gap"] += gap is not None and gap <= 0.02
        mem = cluster.memory_per_device
        if isinstance(case, HfCase) and result.exports is not None:
            ex = result.exports
            overlap = result.problem.costs.overlap_fb if result.problem is not None else None
            exports += [f"- {case.name}: Megatron `--pipeline-model-parallel-layout \"{ex.megatron_layout}\"`"
                        + (" (V placement: no Megatron equivalent)" if case.placement == "v" else "")
                        + f"; torchtitan stages from `{ex.torchtitan_module_fqns[0][0]}` .. "
                        f"`{', '.join(ex.torchtitan_module_fqns[-1])}`"
                        + (f"; costs.overlap_fb {min(overlap):g}-{max(overlap):g}" if overlap else "")]
        rows.append(
            f"| {case.name} | {case.microbatches} | {mem:g} | {imbalance:.0%} | {_ms(steps['uniform'])} | "
            f"{_ms(steps['torchtitan'])} | {_ms(steps['megatron'])} | {_ms(steps['adapipe'])} | "
            f"**{_ms(result.step_time)}** | {_pct(result.step_time, steps['uniform'])} | "
            f"{_pct(result.step_time, steps['adapipe'])} | {rc} ({rc_layers}) / {rc_ada} | {_ms(result.lower_bound)} | "
            f"{'–' if gap is None else f'{gap:.1%}'} | {result.candidates} | {wall:.1f}{'*' if result.wall_cut else ''}{f'†{result.solves_cut}' if result.solves_cut else ''} | {'yes' if ok else 'NO'} |")
    n = notes["n"]
    lines = [
        "# Planning a model: split + recompute + schedule vs the hand rules",
        "",
        f"Made by `{command}` (method auto; every split scheduled within one `plan()` call of "
        f"{time_limit:g} s). Cases from `pipesched.solver.costmodel` on H100s (ms, GiB); `tight`: "
        f"{TIGHT:.0%} of the uniform split's no-recompute need. See the script's docstring for the columns.",
        "",
        "| case | m | memory | imbal. | uniform | torchtitan | megatron | AdaPipe-style | plan | vs unif. | "
        "vs AdaPipe | rc | lower bound | gap | splits | time s | ok |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "Targets (issue 10):",
        "",
        f"- plan <= the best baseline: {notes['best']}/{n}",
        f"- >= 5% faster than uniform where uniform is > 10% imbalanced: {notes['unif'][0]}/{notes['unif'][1]}"
        + (f"; unattainable on {len(notes['beyond'])} (the lower bound over all splits is above 95% of the "
           f"uniform step, so no split is 5% faster): {', '.join(notes['beyond'])}" if notes["beyond"] else ""),
        f"- strictly faster than the AdaPipe-style DP on the tight cases: {notes['ada'][0]}/{notes['ada'][1]}",
        f"- within 2% of the lower bound: {notes['gap']}/{n} (target 6 of 8 at `--time-limit 60`)",
        f"- cases where a plan or the AdaPipe-style DP recomputes: {notes['rc']}/{n}",
        f"- every plan validates and fits memory: {notes['ok']}/{n}",
        f"- searches the planner's wall-clock net cut short (`*` in `time s`; the plan may then differ on an idle "
        f"machine): {notes['cut']}/{n}; searches with a solve its method's own net cut (`†`): {notes['solves_cut']}/{n}",
        *(f"- {name}: a valid plan in {wall:.1f} s of its {time_limit:g} s limit"
          for name, wall in walls.items() if name.startswith("70B") and "p=16 v=2" in name),
        *(["", "Exports of the plans of the models read from Hub configs (`examples/hf`, `pipesched model hf`):", "",
           *exports] if exports else []),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=10.0, metavar="S")
    parser.add_argument("--only", default=None, help="run the cases whose name contains this")
    parser.add_argument("-o", "--output", type=Path, default=OUT)
    args = parser.parse_args(argv)
    publish(run(args.time_limit, args.only, command_line("plan.py", argv)), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())

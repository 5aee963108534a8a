"""Draw the held-out set once: ``benchmarks/heldout_cases.json`` (docs/heldout.md says the rule).

The tuning and development sets of ``benchmarks/cases.py`` both use the zero-bubble paper's four GPT
profiles and p in {4, 8, 16, 32} / {6, 12, 24}; solver changes were made after reading them. This set
shares none of that: other published models, other pipeline depths, other microbatch counts, its
own seed. It was drawn by this script in one commit and is never redrawn in place: a new set gets a
new file (and this script a new seed) once the old one has been looked at for design.

Distribution (one draw per case, ``random.Random(SEED)``):
- model: one of four published shapes (``MODELS``: GPT-3 2.7B, Llama 2 13B, Falcon 40B, Qwen2 7B),
  its per-block F, B, W from the analytic cost model (``pipesched.solver.costmodel``: block FLOPs at
  the device's achieved rate) and activation memory held after F (M_B) and after B until W (M_W),
  bf16, microbatch of one sequence; a stage holds ``max(1, L // S)`` blocks; costs jittered per stage
  and op kind by +-2%; comm = the s·h activation over the model's link (NVLink or InfiniBand);
- memory: deltas F +M_B, B M_W - M_B, W -M_W of each stage's own blocks; cap ``c * p * v * M_B``
  (p microbatches of a device's v stages, as 1F1B holds on device 0, times c uniform in [1, 2]: the
  1p .. 2p of the other sets), one number for all devices;
- placement: loop with v in {1, 2, 4} or V (v = 2); objective stage_span or makespan (3:1);
- (p, m) over p in {5, 10, 20} and m in {2p + 1, 3p + 2, 6p}, cycling, 24 cases.

    python benchmarks/heldout_draw.py            # refuses to overwrite an existing set
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path

from pipesched.solver import Problem
from pipesched.solver.costmodel import DEVICES, LINKS, TransformerConfig
from pipesched.solver.costmodel.hardware import GIB
from pipesched.solver.costmodel.transformer import block_activations, block_flops

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cases  # noqa: E402  (the other sets' draw: placements, objectives, caps; their jitter)
from cases import JITTER  # noqa: E402

OUT = Path(__file__).resolve().parent / "heldout_cases.json"
SEED = 20270114
SIZE = 24
GRID = tuple((p, m) for p in (5, 10, 20) for m in (2 * p + 1, 3 * p + 2, 6 * p))


@dataclass(frozen=True)
class Published:
    """A published model shape, the device it is costed on and the link between stages."""

    model: str
    config: TransformerConfig
    device: str
    link: str


#: Shapes as their papers give them (hidden, layers, heads, KV heads, MLP width, vocabulary, training
#: sequence): GPT-3 2.7B (Brown et al. 2020, Table 2.1), Llama 2 13B (Touvron et al. 2023, Table 1:
#: 4k context), Falcon 40B (Almazrouei et al. 2023: multi-group attention, 8 KV groups, 2k context),
#: Qwen2 7B (Yang et al. 2024, Table 1: 28 heads, 4 KV heads, 18944 MLP width).
MODELS = (
    Published("GPT3-2.7B", TransformerConfig(hidden=2560, layers=32, heads=32, kv_heads=32, ffn=10240, vocab=50257,
                                             seq=2048, microbatch_size=1, gated_mlp=False), "a100", "nvlink"),
    Published("Llama2-13B", TransformerConfig(hidden=5120, layers=40, heads=40, kv_heads=40, ffn=13824, vocab=32000,
                                              seq=4096, microbatch_size=1), "a100", "ib"),
    Published("Falcon-40B", TransformerConfig(hidden=8192, layers=60, heads=128, kv_heads=8, ffn=32768, vocab=65024,
                                              seq=2048, microbatch_size=1, gated_mlp=False), "a100", "ib"),
    Published("Qwen2-7B", TransformerConfig(hidden=3584, layers=28, heads=28, kv_heads=4, ffn=18944, vocab=152064,
                                            seq=4096, microbatch_size=1), "h100", "nvlink"),
)


def _problem(rng: random.Random, model: Published, p: int, m: int, placement: str, v: int, objective: str,
             cap: float) -> Problem:
    c, device, link = model.config, DEVICES[model.device], LINKS[model.link]
    stages = p * v
    blocks = max(1, c.layers // stages)
    f, b, w = (blocks * device.matmul_ms(x) for x in block_flops(c))
    held_f, held_w = (blocks * x / GIB for x in block_activations(c))
    comm = link.latency_ms + c.element_bytes * c.tokens * c.hidden / GIB / link.gib_per_ms

    def jittered(x: float) -> list[float]:
        return [round(x * rng.uniform(1 - JITTER, 1 + JITTER), 4) for _ in range(stages)]

    mb, mw = round(held_f, 4), round(held_w, 4)
    return Problem(
        devices=p, microbatches=m, stages_per_device=v, placement=placement, objective=objective,
        costs={"forward": jittered(f), "backward_input": jittered(b), "backward_weight": jittered(w),
               "comm": round(comm, 4)},
        memory={"forward": mb, "backward_input": round(mw - mb, 4), "backward_weight": -mw,
                "limit": round(cap * p * v * mb, 2)},
    )


def draw() -> list[dict]:
    return [{"name": c.name, "model": c.profile, "cap_factor": c.cap_factor,
             "problem": c.problem.model_dump(mode="json", exclude_none=True)}
            for c in cases.draw(SEED, GRID, SIZE, MODELS, _problem)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if args.out.exists():
        print(f"{args.out} exists: a held-out set is drawn once and never redrawn in place", file=sys.stderr)
        return 2
    record = {"drawn_by": "python benchmarks/heldout_draw.py", "seed": SEED, "grid": [list(x) for x in GRID], "models": [m.model for m in MODELS],
              "rule": "No solver change is made because of what this set shows; once it has been looked at "
                      "for design, a new set is drawn into a new file (docs/heldout.md).",
              "cases": draw()}
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {len(record['cases'])} cases to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

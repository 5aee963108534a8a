"""``python -m pipesched.runtime.check_plan PLAN.json``: replay a plan's layer split and schedule on
local gloo ranks and compare every gradient with a single-process full-batch reference.

The plan (``pipesched plan -o PLAN.json``) names layers, not modules, so the runtime's small
transformer stands in for the model: one module per expanded layer (the first is the embedding, the
last the head, blocks in between). What is checked is the plan's structure: its split, its stage
placement and its schedule give the unsplit model's gradients. Recompute flags change memory and
time only, never gradients; they are replayed without checkpointing.

Prints the plan's shape and a last line ``max_grad_diff=<float> step_s=<float>``; exits 0 when the
largest difference is below 1e-5, 1 when it is not, 2 on a bad or unplannable file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pydantic import ValidationError

from pipesched.solver import Schedule

TOLERANCE = 1e-5


class PlanFileError(ValueError):
    """The file is not a plan this check can replay; the message says why."""


def load_plan(path: str | Path) -> tuple[Schedule, list[tuple[int, int]]]:
    """The plan's schedule and its split in stage order (``[start, end)`` over expanded layers)."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as e:
        raise PlanFileError(f"cannot read {path}: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise PlanFileError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(data, dict) or "stages" not in data:
        raise PlanFileError(f"{path}: not a plan (no 'stages'; make one with pipesched plan -o)")
    if not data.get("schedule") or not data["stages"]:
        raise PlanFileError(f"{path}: the plan has status {data.get('status')!r} and no schedule to replay "
                            f"({data.get('reason') or 'no reason given'})")
    try:
        schedule = Schedule.model_validate(data["schedule"])
    except ValidationError as e:
        raise PlanFileError(f"{path}: schedule: {str(e).splitlines()[0]}") from None
    stages = sorted(data["stages"], key=lambda st: st["stage"])
    split = [(int(st["layers"][0]), int(st["layers"][1])) for st in stages]
    if len(split) != schedule.problem.num_stages:
        raise PlanFileError(f"{path}: {len(split)} stages in the split but the schedule has "
                            f"{schedule.problem.num_stages}")
    if split[0][0] != 0 or len(range(split[0][0], split[-1][1])) < 3:
        raise PlanFileError(f"{path}: the split must start at layer 0 and cover at least 3 layers "
                            "(embedding, a block, head)")
    return schedule, split


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pipesched.runtime.check_plan", description=__doc__.splitlines()[0])
    ap.add_argument("plan", metavar="PLAN.json")
    ap.add_argument("--batch", type=int, default=0, help="batch size (default: 2 x microbatches + 1, uneven)")
    ap.add_argument("--timeout", type=float, default=120.0, help="bound on the spawned ranks (s)")
    args = ap.parse_args(argv)
    try:
        schedule, split = load_plan(args.plan)
    except PlanFileError as e:
        print(f"check_plan: error: {e}", file=sys.stderr)
        return 2

    from .launch import run_ranks
    from .transformer import (
        TinyTransformer,
        config_dict,
        reference_grads,
        replay_rank,
        sample_tokens,
    )

    config = TinyTransformer(layers=split[-1][1] - 2)
    problem = schedule.problem
    batch = args.batch or 2 * problem.microbatches + 1
    results = run_ranks(replay_rank, problem.devices, [(schedule.model_dump_json(), split)], config_dict(config),
                        batch, 2, timeout_s=args.timeout)
    got = {k: g for r in results for k, g in r.value[0]["grads"].items()}
    ref = reference_grads(config, *sample_tokens(batch, config))
    missing = sorted(set(ref) - set(got))
    diff = float("inf") if missing else max(float((got[k] - ref[k]).abs().max()) for k in ref)
    print(f"plan: {schedule.method} p={problem.devices} v={problem.stages_per_device} placement={problem.placement} "
          f"m={problem.microbatches} split={split} batch={batch}" + (f" missing={missing[:3]}" if missing else ""))
    print(f"max_grad_diff={diff:.3g} step_s={max(r.value[0]['step_s'] for r in results):.6f}")
    return 0 if diff < TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())

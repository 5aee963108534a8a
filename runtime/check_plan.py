"""Replay a plan's layer split, recompute choice and schedule on local gloo ranks and compare every
gradient with a single-process full-batch reference; the command is
``python -m pipesched.runtime.check --plan PLAN.json`` (:mod:`pipesched.runtime.check`, the one entry
point), this module is what it runs.

The plan (``pipesched plan -o PLAN.json``) names layers, not modules, so the runtime's small
transformer stands in for the model: one module per expanded layer (the first is the embedding, the
last the head, blocks in between). What is checked is the plan's structure: its split, its stage
placement, its recompute flags (those stages keep only their input between F and B and run their
forward again inside B, :mod:`pipesched.runtime.replay.recompute`) and its schedule give the unsplit
model's gradients.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from pipesched.solver import Schedule


class PlanFileError(ValueError):
    """The file is not a plan this check can replay; the message says why."""


def load_plan(path: str | Path) -> tuple[Schedule, list[tuple[int, int]], list[int]]:
    """The plan's schedule, its split in stage order (``[start, end)`` over expanded layers) and the
    stages it recomputes."""
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
    return schedule, split, [int(st["stage"]) for st in stages if st.get("recompute")]


def replay_plan(path: str | Path, batch: int = 0, timeout_s: float = 120.0) -> tuple[list[str], float]:
    """Replay the plan at ``path``: the lines to print and the largest gradient difference (inf when
    a gradient is missing). Raises :class:`PlanFileError` on a file it cannot replay."""
    schedule, split, recompute = load_plan(path)

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
    batch = batch or 2 * problem.microbatches + 1
    results = run_ranks(replay_rank, problem.devices, [(schedule.model_dump_json(), split, recompute)],
                        config_dict(config), batch, 2, timeout_s=timeout_s)
    got = {k: g for r in results for k, g in r.value[0]["grads"].items()}
    ref = reference_grads(config, *sample_tokens(batch, config))
    missing = sorted(set(ref) - set(got))
    diff = float("inf") if missing else max(float((got[k] - ref[k]).abs().max()) for k in ref)
    return [f"plan: {schedule.method} p={problem.devices} v={problem.stages_per_device} "
            f"placement={problem.placement} m={problem.microbatches} split={split} recompute={recompute} "
            f"batch={batch}" + (f" missing={missing[:3]}" if missing else ""),
            f"max_grad_diff={diff:.3g} step_s={max(r.value[0]['step_s'] for r in results):.6f}"], diff

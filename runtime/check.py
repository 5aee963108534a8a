"""``python -m pipesched.runtime.check``: replay a method's schedule (or, with ``--plan PLAN.json``, a
plan's split, recompute flags and schedule on the runtime's small transformer) on local gloo ranks
and compare every parameter gradient with a single-process full-batch reference.

Runs three steps (the first agrees shapes, the others reuse them), compares the last step's
gradients, and reports the fastest step's time (the max over ranks).

Prints one line per schedule and a last line ``max_grad_diff=<float> step_s=<float>``; exits 0
only when the largest absolute difference is below 1e-5, 1 when it is not, 2 on bad input (a
method that does not apply, a file that is not a replayable plan).
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from pipesched.solver import Problem, Schedule, solve
from pipesched.solver.core.instance import Instance

from .launch import run_ranks
from .model import mlp_stages, reference_grads, sample_batch

TOLERANCE = 1e-5


def replay_rank(rank: int, world: int, schedules: list[str], batch: int, steps: int = 1, dp: int = 1) -> list[dict]:
    """On one rank: run each schedule (JSON) for ``steps`` steps from fresh weights; return grads.

    With ``dp > 1`` the ``world`` ranks are ``dp`` replicas of the pipeline (replica ``k`` holds ranks
    ``k p .. k p + p - 1``), each fed its share of the batch; each stage's gradients are averaged over
    the replicas at the end of the step (:mod:`.grad_sync`)."""
    from .replay.executor import PipelineExecutor

    p = world // dp
    pipe_group, dp_group = _groups(rank, p, dp) if dp > 1 else (None, None)
    replica, pipe_rank = divmod(rank, p)
    out = []
    for text in schedules:
        schedule = Schedule.model_validate_json(text)
        mine = _my_modules(schedule, pipe_rank)
        ex = PipelineExecutor(schedule, mine, torch.nn.functional.mse_loss, timeout_s=20, group=pipe_group,
                              data_parallel=dp_group)
        x, y = sample_batch(batch)
        share = batch // dp
        x, y = x[replica * share:(replica + 1) * share], y[replica * share:(replica + 1) * share]
        times = []
        for _ in range(steps):
            for m in mine.values():
                m.zero_grad(set_to_none=True)
            t0 = time.perf_counter()
            ex.step(x, y)
            times.append(time.perf_counter() - t0)
        grads = {f"{_model_stage(schedule, s)}.{n}": g.grad.clone() for s, m in mine.items()
                 for n, g in m.named_parameters()}
        out.append({"grads": grads, "step_s": min(times)})
    return out


def _groups(rank: int, p: int, dp: int) -> tuple[object, object]:
    """This rank's pipeline group (its replica's ``p`` ranks) and data-parallel group (the ranks holding
    the same stages in every replica); every rank creates every group, in one order."""
    import torch.distributed as dist

    pipes = [dist.new_group(list(range(k * p, (k + 1) * p))) for k in range(dp)]
    replicas = [dist.new_group(list(range(j, p * dp, p))) for j in range(p)]
    return pipes[rank // p], replicas[rank % p]


def _model_stage(schedule: Schedule, stage: int) -> int:
    """The model stage a stage id runs (dual placement: both copies run the same p model stages)."""
    p = schedule.problem.devices
    return stage - p if schedule.problem.placement == "dual" and stage >= p else stage


def _model_stages(schedule: Schedule) -> int:
    problem = schedule.problem
    return problem.devices if problem.placement == "dual" else problem.num_stages


def _my_modules(schedule: Schedule, rank: int) -> dict[int, torch.nn.Module]:
    """This rank's stage modules, fresh from the seed; under "dual" twin ranks build the same model
    stage from the same seed, so twins start with the same parameters."""
    model = mlp_stages(_model_stages(schedule))
    return {s: model[_model_stage(schedule, s)] for s in sorted(_stages_of(schedule, rank))}


def torch_replay_rank(rank: int, world: int, schedules: list[str], batch: int) -> list[dict]:
    """Like :func:`replay_rank` but through torch's ``_PipelineScheduleRuntime`` and the CSV export."""
    from .replay.torch_runtime import torch_schedule, torch_step

    out = []
    for text in schedules:
        schedule = Schedule.model_validate_json(text)
        all_stages = mlp_stages(schedule.problem.num_stages)
        mine = {s: all_stages[s] for s in range(len(all_stages)) if s in _stages_of(schedule, rank)}
        runtime = torch_schedule(schedule, mine, torch.nn.functional.mse_loss)
        x, y = sample_batch(batch)
        torch_step(runtime, mine, schedule.problem.num_stages, x, y)
        out.append({"grads": {f"{s}.{n}": p.grad.clone() for s, m in mine.items() for n, p in m.named_parameters()}})
    return out


def _stages_of(schedule: Schedule, rank: int) -> set[int]:
    """Stage ids the schedule's placement puts on ``rank`` (with or without ops: a dual copy may run
    no microbatch)."""
    return set(Instance.from_problem(schedule.problem).stages_of_device[rank])


def grad_diff(schedule: Schedule, per_rank: list[dict], batch: int) -> float:
    """Largest |pipeline grad - reference grad| over every parameter of every rank (under "dual"
    both twins of a model stage are compared, so a missing twin sum shows)."""
    x, y = sample_batch(batch)
    ref = reference_grads(mlp_stages(_model_stages(schedule)), x, y)
    got = {k for r in per_rank for k in r["grads"]}
    if got != set(ref):
        missing = sorted(set(ref) - got)
        raise AssertionError(f"gradients missing for {missing[:5]}")
    return max(float((g - ref[k]).abs().max()) for r in per_rank for k, g in r["grads"].items())


#: The placement a method needs when ``--placement`` is not given.
PLACEMENT_OF = {"zb-v": "v", "dualpipe-v": "v", "dualpipe": "dual"}


def make_problem(world: int, method: str, microbatches: int, stages_per_device: int,
                 split_backward: bool = True, placement: str | None = None, overlap_fb: float | None = None) -> Problem:
    placement = placement or PLACEMENT_OF.get(method, "loop")
    costs = {} if overlap_fb is None else {"costs": {"overlap_fb": overlap_fb}}
    return Problem(devices=world, microbatches=microbatches,
                   stages_per_device=2 if placement in ("v", "dual") else stages_per_device,
                   placement=placement, split_backward=split_backward, **costs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pipesched.runtime.check", description=__doc__.splitlines()[0])
    ap.add_argument("--plan", metavar="PLAN.json", help="replay this plan (pipesched plan -o) instead of a method; "
                    "--world, --method, --microbatches, --stages-per-device and --fused come from the plan")
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--method", default="1f1b")
    ap.add_argument("--microbatches", type=int, default=None,
                    help="default 4, or 2 x world under a dual placement (DualPipe needs m >= 2p)")
    ap.add_argument("--stages-per-device", type=int, default=1)
    ap.add_argument("--placement", choices=["loop", "v", "dual"],
                    help="stage placement (default: what the method needs, else loop)")
    ap.add_argument("--fused", action="store_true", help="fused backward (no W ops)")
    ap.add_argument("--overlap-fb", type=float, default=None, metavar="FACTOR",
                    help="costs.overlap_fb: a paired F&B lasts FACTOR x (F + B); replayed as F then B")
    ap.add_argument("--batch", type=int, default=0, help="batch size (default: 2 x microbatches + 1, uneven)")
    ap.add_argument("--dp", type=int, default=1, help="data-parallel replicas of the pipeline (--world x --dp "
                    "ranks): each stage's gradients are averaged over them after its last W")
    ap.add_argument("--timeout", type=float, default=120.0)
    args = ap.parse_args(argv)
    if args.plan is not None:
        return _check_plan(args.plan, args.batch, args.timeout)
    if args.microbatches is None:
        dual = (args.placement or PLACEMENT_OF.get(args.method)) == "dual"
        args.microbatches = 2 * args.world if dual else 4
    try:
        problem = make_problem(args.world, args.method, args.microbatches, args.stages_per_device, not args.fused,
                               args.placement, args.overlap_fb)
        schedule = solve(problem, args.method)
    except ValueError as e:
        print(f"check: error: {e}", file=sys.stderr)
        return 2
    if args.dp < 1:
        print(f"check: error: --dp must be >= 1 (got {args.dp})", file=sys.stderr)
        return 2
    batch = (args.batch or 2 * args.microbatches + 1) * args.dp
    results = run_ranks(replay_rank, args.world * args.dp, [schedule.model_dump_json()], batch, 3, args.dp,
                        timeout_s=args.timeout)
    per_rank = [r.value[0] for r in results]
    diff = grad_diff(schedule, per_rank, batch)
    step_s = max(r["step_s"] for r in per_rank)
    pairs = sum(1 for o in schedule.ops if o.kind == "F" and o.end > o.start
                and any(q.kind == "B" and (q.device, q.start, q.end) == (o.device, o.start, o.end) for q in schedule.ops))
    print(f"{args.method}: p={args.world} dp={args.dp} m={args.microbatches} v={problem.stages_per_device} "
          f"placement={problem.placement} split_backward={problem.split_backward} batch={batch}"
          + (f" overlap_fb={args.overlap_fb} pairs={pairs} (replayed as F then B)" if args.overlap_fb else ""))
    print(f"max_grad_diff={diff:.3g} step_s={step_s:.6f}")
    return 0 if diff < TOLERANCE else 1


def _check_plan(path: str, batch: int, timeout_s: float) -> int:
    from .check_plan import PlanFileError, replay_plan

    try:
        lines, diff = replay_plan(path, batch, timeout_s)
    except PlanFileError as e:
        print(f"check: error: {e}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0 if diff < TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())

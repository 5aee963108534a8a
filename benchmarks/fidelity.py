"""Predicted vs measured step time and bubble: profile -> solve -> replay, on this machine (issue 11).

The closed loop of the cost model. A small decoder-only transformer
(:mod:`pipesched.runtime.transformer`) is profiled layer by layer (:func:`profile_layers`, each
distinct layer once, one thread), the fixed per-op cost (:func:`op_overhead`) is taken out of every
layer and added once per op together with the executor's own dispatch cost per op
(:func:`profile_dispatch`), the link between two gloo ranks is measured by ping-pong
(:func:`profile_link`), the contention factor (:func:`contention_factor`: a fixed kernel timed on
every rank at once against each rank alone) and the slowdown curve (:func:`slowdown_curve`: a
block's forward and backward on k ranks at once against alone, for every k), all with ``p`` ranks
running, by calibration runs that replay none of the reported schedules. The uniform layer split
over ``S = p × v`` stages then induces a Problem (stage costs = sums of layer costs × the contention
factor + the per-op cost; ``comm = latency + output / bandwidth``); each method solves it and the
schedule is replayed on ``p`` gloo ranks (one thread each).

Predicted step = the schedule's order re-timed with the layer sums + per-op cost, each op slowed by
the curve's value for the number of ranks busy while it runs (ramps and bubbles leave fewer ranks
competing than the all-busy factor assumes), and each hand-off between ranks delayed by the hand-off
curve's value for the ranks still computing as its producer ends (:func:`handoff_curve`: a woken rank
must get a core back; calibrated by a ping-pong beside j computing ranks); measured = the fastest of ``--steps`` steps (max over
ranks). Bubbles: predicted ``bubble_ratio``; measured ``1 − Σ busy / (p × step)``. Targets (issue
11, on an idle 2-core machine): ``|measured − predicted| / measured ≤ 15%`` on every row, and the
order of methods by predicted step equals the measured order wherever predictions differ by > 10%.
Where a row misses, ``off`` says which term: ``compute: a stage costs more than its layers`` (the
prediction from whole-stage profiles is within the target), ``contention`` (more ranks than cores,
or a loaded machine, and the busiest rank's measured compute differs from its predicted work, the
measured factor included, by > 10%), ``compute`` (the same without contention), else
``comm/overhead`` (compute was predicted; the waits between ops were not). A last table checks the model's
assumption that a stage costs the sum of its layers: per-block F / B / W of a 1-block stage against
an all-blocks stage (split backward's graph walks grow with the stage's depth).

    python benchmarks/fidelity.py          # writes benchmarks/results/fidelity.md (15 min at load 5)
    python benchmarks/fidelity.py --quick  # a smaller model, fewer steps: checks that it runs (1 min)
    python benchmarks/fidelity.py -o benchmarks/results/fidelity_loaded.md --previous benchmarks/results/fidelity.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
from itertools import combinations
from pathlib import Path

import torch

from pipesched.runtime.launch import run_ranks
from pipesched.runtime.machine_load import QUIET_CORES, describe, other_cores
from pipesched.runtime.profiling.contention import contention_factor, handoff_curve, slowdown_curve
from pipesched.runtime.profiling.post_step import (
    dual_step_ms,
    param_bytes,
    profile_twin_sum,
    twin_after,
)
from pipesched.runtime.profiling.profile_layers import (
    LinkProfile,
    op_overhead,
    profile_dispatch,
    profile_layers,
    profile_link,
)
from pipesched.runtime.profiling.profiled_split import (
    ProfiledSplit,
    profiled_split,
    shared_cores_score,
)
from pipesched.runtime.transformer import (
    TinyTransformer,
    config_dict,
    even_split,
    lm_loss,
    replay_rank,
    sample_tokens,
    transformer_layers,
)
from pipesched.solver import (
    Costs,
    Problem,
    Schedule,
    SolveOptions,
    from_order,
    solve,
)
from pipesched.solver.costmodel.shared_cores import curve_makespan, usable_cores
from pipesched.solver.planning import Model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fidelity_depth import depth_table  # noqa: E402
from fidelity_timeline import timeline_lines  # noqa: E402
from report import command_line, publish  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "fidelity.md"
#: (method, stages per device, placement)
METHODS = [("gpipe", 1, "loop"), ("1f1b", 1, "loop"), ("zb-h1", 1, "loop"), ("interleaved-1f1b", 2, "loop"),
           ("zb-v", 2, "v"), ("dualpipe", 2, "dual"), ("auto", 1, "loop")]
TARGET_ERROR = 0.15
ORDER_MARGIN = 0.10


def _machine_rank(rank: int, world: int, cfg: dict, microbatch_size: int
                  ) -> tuple[LinkProfile, float, float, LinkProfile, list[float], list[float]]:
    """The link (ranks 0 and 1), the executor's fixed cost per op, the contention factor, the twin
    gradient sum of a dual placement (every pair at once), the slowdown curve (a block's forward
    and backward on k ranks at once against alone, k = 1 .. world) and the hand-off curve (a ping-pong's
    extra one-way time while j other ranks run that block), with ``world`` ranks running."""
    link = profile_link()
    config = TinyTransformer(**cfg)
    block = transformer_layers(config)[1]
    h = torch.randn(microbatch_size, config.seq, config.hidden, generator=torch.Generator().manual_seed(rank),
                    requires_grad=True)
    curve = slowdown_curve(lambda: block(h).sum().backward())
    handoff = handoff_curve(lambda: block(h).sum().backward())
    return (link, profile_dispatch(latency_ms=link.latency_ms), contention_factor(), profile_twin_sum(), curve, handoff)


def induced_problem(model: Model, split: list[tuple[int, int]], devices: int, v: int, placement: str,
                    microbatches: int, overhead: tuple[float, ...], link: LinkProfile,
                    contention: float = 1.0) -> Problem:
    """Stage costs = sums of the split's layer costs × ``contention`` + the fixed per-op cost; comm
    from the link for the largest activation crossing a stage boundary (the uniform split's are all
    the same size). A stage that starts a chain (token ids in: no input gradient) runs its whole
    backward as W and an empty B, as the executor does, so its layers' B moves into W (left in B, a
    zero-bubble schedule defers those long W ops to the step's end: the p = 2 planned split's waits)."""
    layers = model.expanded()
    sums = [[contention * sum(getattr(x, k) for x in layers[a:b]) for a, b in split]
            for k in ("forward", "backward_input", "backward_weight")]
    sums[2][0], sums[1][0] = sums[2][0] + sums[1][0], 0.0  # model stage 0 (both copies under dual)
    sums = [[t + overhead[i] for t in row] for i, row in enumerate(sums)]
    comm = max(link.link().time(layers[b - 1].output) for _, b in split[:-1])
    return Problem(devices=devices, microbatches=microbatches, stages_per_device=v, placement=placement,
                   costs=Costs(forward=sums[0], backward_input=sums[1], backward_weight=sums[2], comm=comm))


def _layer_text(model: Model) -> str:
    return ", ".join(f"{x.name} × {x.repeat}: F {x.forward:.3f} / B {x.backward_input:.3f} / W {x.backward_weight:.3f}"
                     for x in model.layers)


def _busiest_work(schedule: Schedule) -> float:
    return max(sum(o.end - o.start for o in schedule.ops if o.device == d) for d in range(schedule.problem.devices))


def run(args: argparse.Namespace) -> str:
    torch.set_num_threads(1)
    cfg = TinyTransformer(vocab=args.vocab, hidden=args.hidden, heads=args.heads, ffn=4 * args.hidden,
                          layers=args.layers, seq=args.seq)
    layers = transformer_layers(cfg)
    x, y = sample_tokens(args.microbatch_size, cfg)
    overhead = op_overhead()
    model = profile_layers(layers, x, loss_fn=lm_loss, sample_target=y, op_overhead=overhead,
                           repeats=args.repeats, warmup=2)
    cpu_overhead = op_overhead(cpu_time=True)  # the compute term again, in CPU time: load does not inflate it
    cpu_model = profile_layers(layers, x, loss_fn=lm_loss, sample_target=y, op_overhead=cpu_overhead,
                               repeats=args.repeats, warmup=2, cpu_time=True)
    machine: dict[int, tuple] = {}  # per world size, measured just before its profiles and replays
    lines = [
        "# Cost-model fidelity: predicted vs measured step time",
        "",
        f"Command: `{args.command}`",
        "",
        f"Model: `{cfg}` ({len(layers)} layers), microbatch {args.microbatch_size} sequences, "
        f"{args.microbatches} microbatches, one thread per rank, gloo on 127.0.0.1.",
        "",
        *(["**A `--quick` smoke run: it shows the loop works end to end; the targets apply to the default "
           "configuration on an idle machine.**", ""] if args.quick else []),
        "Profiled at the start (ms per microbatch, the fixed per-op cost taken out; each world size "
        "re-profiles just before its solves and replays and uses that, below the table): " + _layer_text(model)
        + f". Fixed cost inside each op F / B / W: {' / '.join(f'{t:.3f}' for t in overhead)} ms. Per world "
        "size p (measured with p ranks running, just before that world's stage profile and replays): MACHINE.",
        "",
        "Dual rows (DualPipe) add the twin gradient sum after the schedule (``runtime/profiling/post_step.py``): each pair "
        "of twin ranks exchanges and adds the gradients of the two model stages both hold, after the later "
        "of their last ops; its time is the calibration above (the runtime's own routine on synthetic "
        "gradients) at the pair's parameter bytes. The post-step column gives it predicted / measured.",
        "",
        "Predicted from layers: the schedule's order re-timed with layer profiles summed per stage + the per-op "
        "cost, each op slowed by the measured slowdown for the number of ranks busy while it runs (the curve "
        "above: a block's forward and backward on k ranks at once against alone; ``solver/costmodel/shared_cores.py``, "
        "``curve_makespan``). From stages: the same with costs profiled on the whole stages, every stage of every "
        "row and candidate split of a world size in the same alternated rounds just before its replays "
        "(``runtime/profiling/profiled_split.py``), which includes what a stage costs beyond the sum of its layers. The "
        "planned split's schedule is auto's on those stage costs, ranked by the same curve re-timing; its "
        "from-layers column re-times that order with layer sums. Other contention model: the solved schedule's "
        "makespan with every op × the contention factor (all ranks always busy).",
        "",
        f"Previous run's error: the error column of an earlier run ({args.previous[0]}), for comparison.",
        "",
        "Slowest rank, measured: its step split by the executor's per-op timeline into compute (ops running), "
        "waits (an op waiting for its input from another rank), the twin sum, and the rest (between ops: "
        "the plan walk, posting sends). Busiest rank's compute: the most work on one rank, predicted "
        "(layer profiles, contention factor and per-op cost included) against measured wall time; in CPU time: "
        "the same from a second layer profile timed in thread CPU time (no contention, no dispatch) against the "
        "ops' measured thread CPU time. CPU time is what other work on the machine does not inflate, so that "
        "pair checks the compute term even on a loaded machine.",
        "",
        "| p | method | v | predicted step (ms) | measured step (ms) | error | predicted from stages (ms) | "
        "its error | other contention model (ms) | its error | post-step: predicted / measured (ms) | predicted bubble | "
        "measured bubble | slowest rank: compute / waits / twin sum / rest (ms) | busiest rank's compute: predicted / "
        "measured (ms) | in CPU time: predicted / measured (ms) | within 15% | off | previous run's error |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    orders: list[str] = []
    plans: list[str] = []
    reprofiled: list[str] = []
    timelines: list[str] = []
    stage_bytes: dict[tuple, list[int]] = {}  # per split: parameter bytes of each model stage
    for p in args.worlds:
        rows = []
        jobs = []
        machine[p] = run_ranks(_machine_rank, p, config_dict(cfg), args.microbatch_size, timeout_s=args.timeout)[0].value
        link, dispatch, contention, twin, curve, handoff = machine[p]
        per_op = tuple(t + dispatch for t in overhead)
        splits = [even_split(len(layers), p if placement == "dual" else p * v) for _, v, placement in METHODS]
        # the split chosen on whole-stage profiles; every row's stages profiled in the same alternated rounds
        found = profiled_split(layers, x, p, args.microbatches, loss_fn=lm_loss, sample_target=y,
                               link=link.link(), dispatch_ms=dispatch, contention=contention, model=model,
                               time_limit_s=args.split_time_limit, rounds=args.repeats,
                               extra_segments=[seg for sp in splits for seg in sp],
                               score=shared_cores_score(curve=curve, handoff=handoff))
        # layers again, just before this world's solves and replays: the machine's speed drifts
        model = profile_layers(layers, x, loss_fn=lm_loss, sample_target=y, op_overhead=overhead,
                               repeats=args.repeats, warmup=2)
        reprofiled.append(f"p = {p}: " + _layer_text(model))
        for (method, v, placement), split in zip(METHODS, splits, strict=True):
            problem = induced_problem(model, split, p, v, placement, args.microbatches, per_op, link, contention)
            schedule = solve(problem, method, SolveOptions(time_limit_s=args.time_limit))
            bare = induced_problem(model, split, p, v, placement, args.microbatches, per_op, link)
            rows.append((method, v, schedule, bare))
            jobs.append((schedule.model_dump_json(), split))
            stage_bytes[tuple(split)] = [param_bytes(layers[a:b]) for a, b in split]
        planned = found.split
        problem = induced_problem(model, planned, p, 1, "loop", args.microbatches, per_op, link, contention)
        bare = induced_problem(model, planned, p, 1, "loop", args.microbatches, per_op, link)
        rows.append(("auto (planned split)", 1, from_order(problem, "auto", found.schedule.order()), bare))
        jobs.append((found.schedule.model_dump_json(), planned))
        stage_costs = {tuple(sp): found.profile.stage_costs(sp) for _, sp in jobs}
        results = [r.value for r in run_ranks(replay_rank, p, jobs, config_dict(cfg),
                                              args.microbatches * args.microbatch_size, args.steps,
                                              timeout_s=args.timeout)]
        measured, without = [], []
        for j, (method, v, schedule, bare) in enumerate(rows):
            split = [tuple(x) for x in jobs[j][1]]
            # the prediction: the order re-timed with layer sums + per-op cost, each of k busy ranks slowed
            # by the measured curve; from stages: the same with whole-stage profiles; the other model: the
            # solved schedule's makespan, every op × the all-busy contention factor
            by_curve = curve_makespan(from_order(bare, method, schedule.order()), curve, handoff)
            by_stage = curve_makespan(_retimed(schedule, stage_costs[tuple(split)], dispatch), curve, handoff)
            no_handoff = curve_makespan(from_order(bare, method, schedule.order()), curve)
            preds = {"layers": by_curve, "stages": by_stage, "shared": schedule.makespan, "twin": 0.0}
            if schedule.problem.placement == "dual":  # the twin gradient sum after the step
                sb = stage_bytes[tuple(split)]
                preds = {"layers": twin_after(by_curve, sb, twin), "stages": twin_after(by_stage, sb, twin),
                         "shared": dual_step_ms(schedule, sb, twin)}
                preds["twin"] = preds["layers"] - by_curve
            cpu_problem = induced_problem(cpu_model, split, p, v, schedule.problem.placement, args.microbatches,
                                          cpu_overhead, link)
            preds["cpu"] = _busiest_work(from_order(cpu_problem, method, schedule.order()))
            row = _row(p, method, v, schedule, [r[j] for r in results], preds, contention)
            row = (row[0], row[1] + f" {args.previous[1].get((str(p), method), '–')} |")
            measured.append((method, preds, row[0]))
            if schedule.problem.placement == "dual":
                no_handoff = twin_after(no_handoff, stage_bytes[tuple(split)], twin)
            without.append(f"{method} {100 * (row[0] - no_handoff) / row[0]:+.1f}%")
            lines.append(row[1])
        timelines += timeline_lines(p, curve, [(_retimed(schedule, stage_costs[tuple(tuple(x) for x in jobs[j][1])], dispatch)
                                                 .problem, [r[j] for r in results])
                                                for j, (_m, _v, schedule, _b) in enumerate(rows)])
        timelines.append(f"p = {p}: errors of the prediction without the hand-off term (layer sums, slowdown curve "
                         f"only): {', '.join(without)}")
        orders.append(_order_check(p, measured))
        plans.append(_paired(args, cfg, p, found, [r[-1] for r in results]) + _stage_sums(model, stage_costs, sum(overhead), planned,
                                                                           even_split(len(layers), p)))
    at = next(k for k, line in enumerate(lines) if line.endswith("MACHINE."))
    lines[at] = lines[at].replace("MACHINE", "; ".join(
        f"p = {p}: link latency {lk.latency_ms * 1e3:.0f} µs, bandwidth "
        + (f"{lk.gib_per_ms * 1e3:.2f} GiB/s" if lk.gib_per_ms else "not measurable (flat)")
        + f", executor dispatch {d:.3f} ms per op, contention × {c:.2f} on compute (slowdown with k ranks busy: "
        + " / ".join(f"{x:.2f}" for x in cv) + "; hand-off extra with j = 0 .. p − 2 other ranks computing: "
        + " / ".join(f"{x:.2f}" for x in ho) + " ms), twin gradient sum "
        + (f"{tw.latency_ms:.2f} ms + {1 / (tw.gib_per_ms * 1e3):.3f} s per GiB" if tw.gib_per_ms else f"{tw.latency_ms:.2f} ms")
        for p, (lk, d, c, tw, cv, ho) in machine.items()))
    lines += ["", "Layers re-profiled just before each world size's solves and replays (ms, as above):", ""]
    lines += [f"- {x}" for x in reprofiled] + ["", "Order of methods (pairs whose predicted steps differ by > 10%):", ""]
    lines += [f"- {o}" for o in orders]
    lines += ["", "From the replays' timelines (every rank's ops on one clock; alone = the whole-stage profile + "
              "dispatch; benchmarks/fidelity_timeline.py):", ""] + [f"- {x}" for x in timelines]
    lines += depth_table(layers, x, args.depth_rounds)
    lines += ["", "Planned split vs the uniform split (target: measured gain >= half the predicted gain). The split is "
              "chosen by ``runtime/profiling/profiled_split.py``: every contiguous segment a candidate split uses is profiled "
              "as one stage in alternated rounds (median per op), each candidate's Problem (× the contention factor, "
              "+ dispatch, comm from the link) is solved by auto, and the least step re-timed with the slowdown curve "
              "wins; the uniform split's "
              "schedule is auto's on the same profile. Both are replayed alternately, one job each per round, "
              "so a change of machine speed hits both alike; the measured gain is the median of the per-round "
              "differences. The verdict is given in ms and as a fraction of the uniform split's step (a uniform error of "
              "the machine's speed, such as a contention factor measured at a busier moment, scales the ms, not the "
              "fraction). Waits: per rank, idle time before its ops in the predicted schedule / measured "
              "(the planned schedule, its fastest step in the main replay).", ""]
    lines += [f"- {x}" for x in plans]
    return "\n".join(lines) + "\n"


def _row(p: int, method: str, v: int, schedule: Schedule, ranks: list[dict], preds: dict[str, float],
         contention: float) -> tuple[float, str]:
    """(measured step ms, table row) of one replayed schedule; ``off`` names the term that misses."""
    step = 1e3 * max(r["step_s"] for r in ranks)
    busy = [1e3 * r["busy_s"] for r in ranks]
    bubble = 1 - sum(busy) / (p * step)
    err, err_stage, err_shared = ((step - preds[k]) / step for k in ("layers", "stages", "shared"))
    pred_busy, meas_busy = _busiest_work(schedule), max(busy)
    busiest_cpu = 1e3 * max(r["cpu_s"] for r in ranks)
    ok = abs(err) <= TARGET_ERROR
    cores = usable_cores()
    compute_off = abs(meas_busy / pred_busy - 1) > 0.10
    other = other_cores([r["marks"] for r in ranks])  # not the load average: it counts our own ranks
    contended = (f"p > cores, measured × {contention:.2f}" if p > cores else
                 describe(other, cores) if other is not None and other >= QUIET_CORES else "")
    term = ("compute: a stage costs more than its layers" if abs(err_stage) <= TARGET_ERROR else
            "contention: the other contention model is within 15%"
            if contended and abs(err_shared) <= TARGET_ERROR else
            f"contention ({contended}; busiest rank's compute {100 * (meas_busy / pred_busy - 1):+.0f}%)"
            if compute_off and contended else "compute" if compute_off else
            "comm/overhead" + (f" (under contention: {contended})" if contended else ""))
    twin_meas = 1e3 * max(r["twin_s"] for r in ranks)
    return step, (f"| {p} | {method} | {v} | {preds['layers']:.2f} | {step:.2f} | {100 * err:+.1f}% | "
                  f"{preds['stages']:.2f} | {100 * err_stage:+.1f}% | {preds['shared']:.2f} | {100 * err_shared:+.1f}% | "
                  + (f"{preds['twin']:.2f} / {twin_meas:.2f}" if schedule.problem.placement == "dual" else "–")
                  + f" | {schedule.bubble_ratio:.3f} | {bubble:.3f} | {_split_step(ranks)} | "
                  f"{pred_busy:.2f} / {meas_busy:.2f} | {preds['cpu']:.2f} / {busiest_cpu:.2f} | "
                  f"{'yes' if ok else 'no'} | "
                  f"{'' if ok else term} |")


def _split_step(ranks: list[dict]) -> str:
    """The slowest rank's step as compute / waits / twin sum / rest (ms), from its per-op timeline."""
    r = max(ranks, key=lambda r: r["step_s"])
    compute = sum(end - start for *_, _w, start, end, _c in r["timeline"])
    waits = sum(start - wait for *_, wait, start, _e, _c in r["timeline"])
    rest = r["step_s"] - compute - waits - r["twin_s"]
    return " / ".join(f"{1e3 * x:.1f}" for x in (compute, waits, r["twin_s"], rest))


def _retimed(schedule: Schedule, costs: Costs, dispatch: float) -> Schedule:
    """``schedule``'s per-device order re-timed under per-stage ``costs`` + the dispatch cost."""
    new = Costs(forward=[c + dispatch for c in costs.forward],
                backward_input=[c + dispatch for c in costs.backward_input],
                backward_weight=[c + dispatch for c in costs.backward_weight],
                comm=schedule.problem.costs.comm)
    problem = Problem.model_validate({**schedule.problem.model_dump(), "costs": new.model_dump()})
    return from_order(problem, schedule.method, schedule.order())


def _paired(args: argparse.Namespace, cfg: TinyTransformer, p: int, found: ProfiledSplit, main: list[dict]) -> str:
    """The planned split against the uniform one (auto's schedules on one whole-stage profile), replayed
    alternately for ``--pair-rounds`` rounds (a job's step: its fastest of ``--steps``): predicted and per-round
    steps, the median gain, the planned schedule's waits per rank predicted / measured (``main``'s ranks)."""
    uniform = even_split(cfg.layers + 2, p)
    planned_s, uniform_s = found.schedule, found.schedule_of(uniform)
    pred_p, pred_u = found.predicted(found.split), found.predicted(uniform)
    gain_p = pred_u - pred_p
    head = (f"p = {p}: split {found.split}, the least of {len(found.candidates)} "
            f"{'splits (all)' if found.enumerated else 'planner candidates'}"
            f" (ranked by the slowdown-curve re-timing); predicted {pred_p:.2f} ms "
            f"against uniform {pred_u:.2f} ms, gain {gain_p:.2f} ms ({100 * gain_p / pred_u:+.1f}%)")
    if found.split == uniform:
        return head + ": the uniform split itself"
    jobs = [(planned_s.model_dump_json(), found.split), (uniform_s.model_dump_json(), uniform)] * args.pair_rounds
    res = [r.value for r in run_ranks(replay_rank, p, jobs, config_dict(cfg), args.microbatches * args.microbatch_size,
                                      args.steps, timeout_s=args.timeout)]
    step = [1e3 * max(r[j]["step_s"] for r in res) for j in range(len(jobs))]
    gain_m = statistics.median(u - q for q, u in zip(step[0::2], step[1::2], strict=True))
    rel_p, rel_m = gain_p / pred_u, gain_m / statistics.median(step[1::2])  # free of a uniform speed error
    met = ("no predicted gain" if gain_p <= 0 else f"{'met' if gain_m >= gain_p / 2 else 'missed'} in ms, "
           f"{'met' if rel_m >= rel_p / 2 else 'missed'} as a fraction of the uniform split's step")
    idle = [t[0].start + sum(b.start - a.end for a, b in zip(t, t[1:], strict=False)) for t in (
        sorted((o for o in planned_s.ops if o.device == d), key=lambda o: o.start) for d in range(p))]
    waits = [1e3 * sum(start - wait for *_, wait, start, _e, _c in r["timeline"]) for r in main]
    return (head + f"; measured in {args.pair_rounds} alternated rounds (planned / uniform ms): "
            + ", ".join(f"{q:.1f} / {u:.1f}" for q, u in zip(step[0::2], step[1::2], strict=True))
            + f"; median gain {gain_m:.2f} ms ({100 * rel_m:+.1f}%): {met}. "
            "Waits per rank, predicted / measured (ms): "
            + ", ".join(f"rank {d}: {idle[d]:.1f} / {waits[d]:.1f}" for d in range(p)))


def _stage_sums(model: Model, stage_costs: dict[tuple, Costs], fixed: float, *splits: list[tuple[int, int]]) -> str:
    """F + B + W per stage (ms, one microbatch) of each split, summed from the layer profiles (plus
    the fixed cost of the three ops, which a whole-stage profile holds once) against profiled on the
    whole stage: which stage the layer sums get wrong."""
    layers = model.expanded()
    out = []
    for split in splits:
        c = stage_costs[tuple(tuple(x) for x in split)]
        pairs = [(fixed + sum(x.forward + x.backward_input + x.backward_weight for x in layers[a:b]),
                  c.forward[k] + c.backward_input[k] + c.backward_weight[k]) for k, (a, b) in enumerate(split)]
        out.append(", ".join(f"{a:.1f} / {b:.1f}" for a, b in pairs))
    return (". Per stage F + B + W, layers summed / whole stage profiled (ms; planned, then uniform): "
            + "; ".join(f"[{x}]" for x in out))


def _order_check(p: int, rows: list[tuple[str, dict[str, float], float]]) -> str:
    pairs = [(a, b) for a, b in combinations(rows, 2)
             if abs(a[1]["layers"] - b[1]["layers"]) > ORDER_MARGIN * min(a[1]["layers"], b[1]["layers"])]
    wrong = [f"{a[0]} vs {b[0]}" for a, b in pairs if (a[1]["layers"] < b[1]["layers"]) != (a[2] < b[2])]
    return (f"p = {p}: {len(pairs) - len(wrong)} of {len(pairs)} pairs in the predicted order"
            + (f" (not: {', '.join(wrong)})" if wrong else ""))


def _previous(path: Path) -> tuple[str, dict[tuple[str, str], str]]:
    """The commit and the per-row errors ((p, method) -> error cell) of the results file about to be
    replaced, read before it is overwritten."""
    if not path.exists():
        return "none", {}
    commit, errors = "commit unknown", {}
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 5 and cells[0].isdigit() and cells[5].endswith("%"):
            errors[(cells[0], cells[1])] = cells[5]
        elif line.startswith("- commit: "):
            commit = "commit " + line.removeprefix("- commit: ").split()[0]
    return commit, errors


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small model, few steps: proves the loop runs")
    ap.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    for name, default in (("hidden", 256), ("heads", 4), ("layers", 8), ("seq", 128), ("microbatch-size", 2),
                          ("microbatches", 8), ("steps", 6), ("repeats", 7)):
        ap.add_argument(f"--{name}", type=int, default=default)
    ap.add_argument("--vocab", type=int, default=8192, help="a large vocabulary makes the head heavy")
    ap.add_argument("--depth-rounds", type=int, default=30, help="alternated runs of the stage-depth table")
    ap.add_argument("--time-limit", type=float, default=10.0, help="auto's time limit (s)")
    ap.add_argument("--split-time-limit", type=float, default=2.0, help="auto's limit per candidate split (s)")
    ap.add_argument("--pair-rounds", type=int, default=5, help="alternated rounds of planned vs uniform")
    ap.add_argument("--timeout", type=float, default=600.0, help="bound on each replay group (s)")
    ap.add_argument("-o", "--output", type=Path, default=RESULTS)
    ap.add_argument("--previous", type=Path, default=None,
                    help="results file whose errors to show for comparison (default: the output being replaced)")
    args = ap.parse_args(argv)
    args.command = command_line("fidelity.py", argv)
    if args.quick:
        args.hidden, args.seq, args.vocab, args.steps, args.repeats, args.time_limit = 64, 32, 2048, 3, 3, 3.0
        args.depth_rounds, args.pair_rounds, args.split_time_limit = 10, 2, 0.5
    args.previous = _previous(args.previous or args.output)
    publish(run(args), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``pipesched plan MODEL.json --cluster CLUSTER.json [--method auto] [--time-limit S] [-o PLAN.json] [--svg G.svg]``.

Model and cluster may also come in one file ``{"model": ..., "cluster": ...}``. Exit codes as
``solve``: 0 a plan with a schedule, 1 none (infeasible, the reason printed), 2 bad input (one line
``pipesched: error: ...`` naming the file and field, raised as :class:`InputError`). The command is
registered by :mod:`pipesched.solver.cli`, which hands in the torch CSV writer and the Gantt renderer from
the formats layer (planning sits below it).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pipesched.solver import Schedule
from pipesched.solver.core.io import InputError, describe_validation_error, parse_json
from pipesched.solver.isolated import call_isolated

from .exports import TORCHTITAN_NAMES, TORCHTITAN_VERSION, ModuleNames
from .labels import device_labels
from .model import Cluster, Model
from .plan import Plan
from .planner import plan

EXIT_OK, EXIT_NO_PLAN = 0, 1
TorchCsv = Callable[[Schedule], str]
#: ``render_svg(schedule, row_labels)`` from the formats layer (planning sits below it).
RenderSvg = Callable[[Schedule, list[str]], str]


def _read_json(path: str, what: str) -> Any:
    try:
        text = Path(path).read_bytes()
    except OSError as e:
        raise InputError(f"cannot read {what} file {path}: {e.strerror or e}") from None
    return parse_json(text, path)


def _validate(kind: type[Model] | type[Cluster], data: Any, path: str, what: str) -> Any:
    try:
        return kind.model_validate(data)
    except ValidationError as e:
        raise InputError(f"{path}: invalid {what}: {describe_validation_error(e)}") from None


def load_inputs(model_path: str, cluster_path: str | None) -> tuple[Model, Cluster]:
    """The model and the cluster, from one combined file or a model file and a cluster file."""
    data = _read_json(model_path, "model")
    combined = isinstance(data, dict) and "model" in data
    if combined and cluster_path is not None and "cluster" in data:
        raise InputError(f"{model_path} holds a cluster and --cluster gives another: keep one")
    model = _validate(Model, data["model"] if combined else data, model_path, "model")
    if cluster_path is not None:
        return model, _validate(Cluster, _read_json(cluster_path, "cluster"), cluster_path, "cluster")
    if combined and "cluster" in data:
        return model, _validate(Cluster, data["cluster"], model_path, "cluster")
    raise InputError(f"no cluster: pass --cluster CLUSTER.json or put \"cluster\" next to \"model\" in {model_path}")


def parse_module_names(text: str) -> ModuleNames:
    """``INPUT;BLOCK;OUTPUT`` with comma-separated input and output names, e.g. :data:`TORCHTITAN_NAMES`."""
    parts = text.split(";")
    if len(parts) != 3:  # what BLOCK must hold, ModuleNames checks
        raise InputError(f"--module-names must be INPUT;BLOCK;OUTPUT with {{i}} in BLOCK "
                         f"(e.g. {TORCHTITAN_NAMES!r}), got {text!r}")
    split = [[x for x in p.split(",") if x] for p in (parts[0], parts[2])]
    try:
        return ModuleNames(input=split[0], block=parts[1], output=split[1])
    except ValidationError:
        raise InputError(f"--module-names must be INPUT;BLOCK;OUTPUT whose BLOCK formats with {{i}} alone (no "
                         f"other braces; e.g. {TORCHTITAN_NAMES!r}), got {text!r}") from None


def _ms(x: float | None) -> str:
    return "–" if x is None else f"{x:.6g}"


def _gap(p: Plan) -> str:
    """The gap with enough digits that an unproven plan never reads "0.0%"."""
    if p.gap is None:
        return "–"
    digits = 1
    while p.status != "optimal" and p.gap > 0 and digits < 6 and not f"{p.gap:.{digits}%}".strip("0.%"):
        digits += 1
    return f"{p.gap:.{digits}%}"


def summary(p: Plan) -> str:
    """A few human lines about a plan (what ``plan`` prints on stderr)."""
    lines = [f"plan · method {p.method} · status {p.status} · objective {p.cluster.objective}"]
    if p.schedule is None:
        lines.append(f"no plan: {p.reason or 'no reason given'}")
    else:
        gap = _gap(p)
        rc = [str(st.stage) + ("" if st.recompute_layers is None else f" ({len(st.recompute_layers)} layers)")
              for st in p.stages if st.recompute]
        lines += [
            f"microbatches {p.microbatches} · step time {_ms(p.step_time)} · lower bound over all splits "
            f"{_ms(p.lower_bound)} · gap {gap}",
            f"split {p.exports.megatron_layout if p.exports else '?'} · recompute stages: {' '.join(rc) or 'none'}",
            "baselines: " + " · ".join(f"{b.name} {_ms(b.step_time)}" for b in p.baselines),
            "peak memory per device (static + activations + transient): "
            + " ".join(_ms(x) for x in p.peak_memory),
        ]
        sched = p.schedule
        if sched.pipeline_end is not None and sched.step_end is not None:
            lines.insert(2, f"the step ends {_ms(sched.step_end - sched.pipeline_end)} after the pipeline "
                            f"({_ms(sched.pipeline_end)}): exposed gradient sync and optimizer step")
    lines.append(f"{p.candidates} splits scheduled in {p.solve_time_s:.3f} s")
    return "\n".join(lines)


def _write(path: str, text: str) -> None:
    try:
        Path(path).write_text(text)
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror or e}") from None


def cmd_plan(args: argparse.Namespace, torch_csv: TorchCsv | None = None, render: RenderSvg | None = None) -> int:
    model, cluster = load_inputs(args.model, args.cluster)
    if not args.time_limit > 0:
        raise InputError(f"--time-limit must be > 0 seconds (got {args.time_limit})")
    names = parse_module_names(args.module_names) if args.module_names else None
    # in a child: Ctrl-C stops the plan at once (call_isolated says why), a native crash is one line
    result = call_isolated(plan, model, cluster, args.method, args.time_limit, names=names)
    if torch_csv is not None and result.schedule is not None and result.exports is not None:
        result.exports = result.exports.model_copy(update={"torch_csv": torch_csv(result.schedule)})
    text = result.model_dump_json() + "\n"
    if args.output:
        _write(args.output, text)
    else:
        sys.stdout.write(text)
    if getattr(args, "svg", None) and render is not None and result.schedule is not None:
        _write(args.svg, render(result.schedule, device_labels(result)))
    print(summary(result), file=sys.stderr)
    return EXIT_OK if result.schedule is not None else EXIT_NO_PLAN


def add_plan_parser(subparsers: argparse._SubParsersAction, torch_csv: TorchCsv | None = None,
                    render: RenderSvg | None = None) -> None:
    """Add ``plan`` to the ``pipesched`` command."""
    p = subparsers.add_parser("plan", help="choose a model's layer split, recomputation and schedule together")
    p.add_argument("model", help="model JSON file, or one file {\"model\": ..., \"cluster\": ...}")
    p.add_argument("--cluster", "-c", default=None, metavar="CLUSTER.json", help="cluster JSON file")
    p.add_argument("--method", "-m", default="auto", help="schedule method for every split (default auto)")
    p.add_argument("--time-limit", type=float, default=10.0, metavar="S", help="seconds for the whole plan")
    p.add_argument("--module-names", default=None, metavar="IN;BLOCK;OUT",
                   help=f"torchtitan module names, default {TORCHTITAN_NAMES!r} (torchtitan {TORCHTITAN_VERSION}'s "
                   "Llama names; other models: their own)")
    p.add_argument("-o", "--output", default=None, metavar="PLAN.json", help="write the plan here, not stdout")
    if render is not None:
        p.add_argument("--svg", default=None, metavar="GANTT.svg",
                       help="write the plan's Gantt chart, each device labelled with its layers")
    p.set_defaults(handler=lambda args: cmd_plan(args, torch_csv, render))

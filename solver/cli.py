"""``pipesched solve | methods | validate | render``: the solver's sub-commands.

Exit codes: 0 a schedule (optimal or feasible) / a valid schedule; 1 no schedule (infeasible,
timeout) / an invalid schedule; 2 bad input, raised as :class:`InputError` or
:class:`NotApplicableError` and turned into one line by :mod:`pipesched.cli`.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from .core.canonical import problem_key
from .core.io import InputError, dump_json, load_problem, load_schedule
from .core.method import SolveOptions
from .core.problem import Problem
from .core.schedule import Schedule
from .formats.render import render_svg
from .formats.torch_csv import to_torch_csv
from .isolated import solve_isolated
from .planning.cli import add_plan_parser
from .timing.validate import validate

EXIT_OK = 0
EXIT_NO_SCHEDULE = 1


def default_method() -> str:
    """``auto`` when a solver registers it, else the memory-aware ``greedy``, else ``gpipe``."""
    from .registry import methods  # loads the exact models: only when a name is checked

    names = {m.name for m in methods()}
    for name in ("auto", "greedy", "gpipe"):
        if name in names:
            return name
    return sorted(names)[0]


def _write(path: str, text: str) -> None:
    try:
        Path(path).write_text(text)
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror or e}") from None


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.6g}"


def summary(schedule: Schedule) -> str:
    """A few human lines about a schedule (what ``solve`` prints on stderr)."""
    s = schedule
    lines = [f"method {s.method} · status {s.status} · objective {s.problem.objective}"]
    if not s.ops:
        lines.append(f"no schedule: {s.reason or 'no reason given'}")
        if s.lower_bound is not None:
            lines.append(f"lower bound {_num(s.lower_bound)}")
    else:
        gap = gap_text(s.gap, s.status)
        bubble = "–" if s.bubble_ratio is None else f"{s.bubble_ratio:.1%}"
        units = s.problem.units
        in_time = f" ({units.time})" if units and units.time else ""
        in_memory = f" ({units.memory})" if units and units.memory else ""
        lines.append(
            f"makespan {_num(s.makespan)} · objective {_num(s.objective_value)} · "
            f"lower bound {_num(s.lower_bound)}{in_time} · gap {gap} · bubble {bubble}"
        )
        if s.pipeline_end is not None and s.step_end is not None:
            lines.append(f"step end {_num(s.step_end)} = pipeline end {_num(s.pipeline_end)} + "
                         f"{_num(s.step_end - s.pipeline_end)} of gradient sync and optimizer no op hides")
        lines.append(f"peak memory per device{in_memory}: " + " ".join(_num(x) for x in s.peak_memory))
        if (warning := s.problem.memory_warning(s.peak_memory)) is not None:
            lines.append(f"warning: {warning}")
        if s.reason:  # e.g. the windows were exhausted before the limit, or the wall clock cut a phase
            lines.append(f"note: {s.reason}")
    lines.append(f"solve time {s.solve_time_s:.3f} s")
    return "\n".join(lines)


def gap_text(gap: float | None, status: str) -> str:
    """The gap as a percentage with as many digits as it takes not to read "0.0%" when it is not 0:
    an unproven (``feasible``) answer never looks proven."""
    if gap is None:
        return "–"
    if gap == 0 or status == "optimal":
        return f"{gap:.1%}"
    for digits in range(1, 7):
        if f"{gap:.{digits}%}".strip("0.%"):
            return f"{gap:.{digits}%}"
    return f"{gap * 100:.1e}%"


def cmd_solve(args: argparse.Namespace) -> int:
    problem = load_problem(args.problem)
    if args.time_limit is not None and not args.time_limit > 0:
        raise InputError(f"--time-limit must be > 0 seconds (got {args.time_limit})")
    name = args.method or default_method()
    if args.backend is not None and name != "ilp":
        raise InputError(f"--backend {args.backend}: only --method ilp has backends (got --method {name})")
    hint = None
    if args.hint is not None:
        hint = load_schedule(args.hint)
        if problem_key(hint.problem) != problem_key(problem):
            raise InputError(f"--hint {args.hint}: made for a different problem than {args.problem}")
        hint = hint.model_copy(update={"problem": problem})
    options = SolveOptions(hint=hint, backend=args.backend)
    if args.time_limit is not None:
        options = replace(options, time_limit_s=args.time_limit)
    schedule = solve_isolated(problem, name, options)  # a native solver crash cannot kill the CLI
    text = dump_json(schedule)
    if args.output:
        _write(args.output, text)
    else:
        sys.stdout.write(text)
    if args.svg:
        _write(args.svg, render_svg(schedule))
    print(summary(schedule), file=sys.stderr)
    return EXIT_OK if schedule.ops else EXIT_NO_SCHEDULE


def cmd_methods(args: argparse.Namespace) -> int:
    from .registry import methods

    rows = [(m.name, m.summary) for m in methods()]
    width = max((len(n) for n, _ in rows), default=6)
    print(f"{'method':<{width}}  when it applies")
    for name, text in rows:
        print(f"{name:<{width}}  {text}")
    print(f"\ndefault for `solve`: {default_method()}")
    return EXIT_OK


def problem_differences(expected: Problem, got: Problem) -> list[str]:
    """Top-level fields where the schedule's problem differs from the given one."""
    a, b = expected.model_dump(), got.model_dump()
    return [f"{k}: {b[k]!r} in the schedule, {a[k]!r} in the problem" for k in a if a[k] != b[k]]


def cmd_validate(args: argparse.Namespace) -> int:
    problem = load_problem(args.problem)
    schedule = load_schedule(args.schedule)
    diffs = problem_differences(problem, schedule.problem)
    if diffs:
        print(f"invalid: {args.schedule} was made for a different problem than {args.problem}")
        for d in diffs:
            print(f"  {d}")
        return EXIT_NO_SCHEDULE
    errors = validate(schedule, limit=sys.maxsize)
    if errors:
        print(f"invalid: {len(errors)} violation{'s' if len(errors) != 1 else ''}")
        for e in errors:
            print(f"  {e}")
        return EXIT_NO_SCHEDULE
    print(f"valid ({schedule.status}, {len(schedule.ops)} ops, objective {_num(schedule.objective_value)})")
    return EXIT_OK


def cmd_render(args: argparse.Namespace) -> int:
    schedule = load_schedule(args.schedule)
    svg = render_svg(schedule)
    if args.output == "-":
        sys.stdout.write(svg)
    else:
        _write(args.output, svg)
    return EXIT_OK


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add solve, plan, methods, validate and render to the ``pipesched`` command."""
    p = subparsers.add_parser("solve", help="schedule a problem and print the schedule JSON")
    p.add_argument("problem", help="problem JSON file, or - for stdin (a schedule file works too: its problem is used)")
    p.add_argument("--method", "-m", default=None, help="method name (see `pipesched methods`); default auto")
    p.add_argument("--time-limit", type=float, default=None, metavar="S", help="seconds for exact solvers")
    p.add_argument("-o", "--output", default=None, metavar="OUT.json", help="write the schedule here, not stdout")
    p.add_argument("--svg", default=None, metavar="GANTT.svg", help="also write a Gantt chart")
    p.add_argument("--hint", default=None, metavar="SCHEDULE.json",
                   help="warm-start from this schedule (of the same problem): auto, cpsat and ilp start from it")
    p.add_argument("--backend", default=None, choices=("cbc", "highs"),
                   help="the ILP solver for --method ilp: cbc (default, bundled) or highs (pipesched[highs])")
    p.set_defaults(handler=cmd_solve)

    add_plan_parser(subparsers, torch_csv=to_torch_csv, render=render_svg)

    p = subparsers.add_parser("methods", help="list the scheduling methods and when each applies")
    p.set_defaults(handler=cmd_methods)

    p = subparsers.add_parser("validate", help="check a schedule against a problem; list every violation")
    p.add_argument("problem", help="problem JSON file")
    p.add_argument("schedule", help="schedule JSON file")
    p.set_defaults(handler=cmd_validate)

    p = subparsers.add_parser("render", help="draw a schedule as an SVG Gantt chart")
    p.add_argument("schedule", help="schedule JSON file")
    p.add_argument("-o", "--output", default="-", metavar="GANTT.svg", help="output file (default stdout)")
    p.set_defaults(handler=cmd_render)

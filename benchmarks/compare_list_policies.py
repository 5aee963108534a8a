"""The V and interleaved list-policy sets before and after their re-derivation, on the DEVELOPMENT set.

Why: ``benchmarks/tune_list_policies.py`` chose the sets on their own tuning cases; this shows what the
change does on cases that chose nothing (``development()``; not blind, docs/heldout.md, and never the
held-out set). The rule decides the sets, not these figures: a loss here is reported, not tuned away.

Per family, each heuristic alone and deterministic (orders timed by ``compact``, counted trials, no
wall clock), with the sets before and after (both read from the tuning results' JSON):
``zb-v-greedy`` (``v_candidates``), ``v-memory`` grid (its list scheduler plus ZB-V and the deferred-W
order, no search), ``v-memory`` method (``vm_candidates`` with the trials of a nominal ``--limit``,
the wide grid run in its order), interleaved grid (``interleaved_candidates`` without search).
Change = after / before - 1 per case (negative is better).

    python benchmarks/compare_list_policies.py [--limit 1] [--out benchmarks/results/compare_list_policies.md]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pipesched.solver import Instance, SolveOptions, solve
from pipesched.solver.heuristics import interleaved_memory, v_greedy, v_memory
from pipesched.solver.heuristics.listsched.policies import ILPolicy, VMPolicy, VPolicy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import Case, development  # noqa: E402
from report import command_line, publish  # noqa: E402

RESULTS = Path(__file__).parent / "results"
PROBLEMS: dict[int, Any] = {}  # id of an instance -> its problem, for auto


def _sets(name: str, cls: type) -> dict[str, tuple[Any, ...]]:
    figs = json.loads((RESULTS / f"tune_list_policies_{name}.json").read_text())["figures"]
    build = (lambda d: cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})) if cls else tuple
    return {when: tuple(build(d) for d in figs[when]) if cls else tuple(figs[when]) for when in ("before", "chosen")}


@contextmanager
def patched(module: Any, **values: Any) -> Iterator[None]:
    """Run with module globals replaced (the heuristics read their sets at call time)."""
    old = {k: getattr(module, k) for k in values}
    for k, v in values.items():
        setattr(module, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(module, k, v)


def _best(incs: list[Any]) -> float:
    return incs[0].objective if incs else math.inf


def families(limit: float, auto_s: float = 0.0) -> list[tuple[str, str, Callable[[Instance, str], float]]]:
    """(name, placement it applies to, value of the heuristic on an instance with the 'before' or 'chosen' sets)."""
    vg, vm, il = _sets("v-greedy", VPolicy), _sets("v-memory", VMPolicy), _sets("interleaved", ILPolicy)
    wide = _sets("v-wide", None)

    def greedy(inst: Instance, when: str) -> float:
        with patched(v_greedy, POLICIES=vg[when]):
            return _best(v_greedy.v_candidates(inst, keep=1))

    def vm_grid(inst: Instance, when: str) -> float:
        with patched(v_memory, POLICIES=vm[when]):
            return _best(v_memory.vm_candidates(inst, keep=1))

    def vm_method(inst: Instance, when: str) -> float:
        with patched(v_memory, POLICIES=vm[when], V_WIDE_GRID_ORDER=wide[when]):
            return _best(v_memory.vm_candidates(inst, keep=1, trials=v_memory.search_trials(inst, limit)))

    def interleaved(inst: Instance, when: str) -> float:
        with patched(interleaved_memory, POLICIES=il[when]):
            return _best(interleaved_memory.interleaved_candidates(inst, keep=1))

    def auto(inst: Instance, when: str) -> float:
        with patched(v_greedy, POLICIES=vg[when]), patched(v_memory, POLICIES=vm[when], V_WIDE_GRID_ORDER=wide[when]), \
                patched(interleaved_memory, POLICIES=il[when]):
            got = solve(PROBLEMS[id(inst)], "auto", SolveOptions(time_limit_s=auto_s))
            return got.objective_value if got.objective_value is not None else math.inf

    if auto_s:
        return [(f"auto at {auto_s:g} s (wall clock)", "v", auto), (f"auto at {auto_s:g} s (wall clock)", "loop", auto)]
    return [("zb-v-greedy", "v", greedy), ("v-memory grid", "v", vm_grid),
            (f"v-memory method ({limit:g} s of trials)", "v", vm_method), ("interleaved grid", "loop", interleaved)]


def applies(case: Case, placement: str) -> bool:
    pr = case.problem
    return pr.placement == placement and (placement == "v" or pr.stages_per_device >= 2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=float, default=1.0, help="nominal seconds whose trials v-memory's search gets")
    ap.add_argument("--auto", type=float, default=0.0, help="instead: auto at this many seconds with the sets "
                    "before and after (wall-clock bound, so load moves it; the zero-bubble head is today's in both)")
    ap.add_argument("--out", type=Path, default=RESULTS / "compare_list_policies.md")
    args = ap.parse_args(argv)
    lines = ["# List-policy sets before and after their re-derivation, on the development set", "",
             f"Made by `{command_line('compare_list_policies.py', argv)}`. The sets were chosen on "
             "`v_tuning()` / `interleaved_tuning()` (`benchmarks/tune_list_policies.py`); no development case "
             "chose anything here. Change = after / before - 1 (negative is better).", "",
             "| family | cases | mean change (%) | worst change (%) | best change (%) |", "|---|---|---|---|---|"]
    rows, summary = [], {}
    for name, placement, value in families(args.limit, args.auto):
        changes = []
        for case in development():
            if not applies(case, placement):
                continue
            inst = Instance.from_problem(case.problem)
            PROBLEMS[id(inst)] = case.problem
            before, after = value(inst, "before"), value(inst, "chosen")
            change = after / before - 1 if math.isfinite(before) and math.isfinite(after) else math.nan
            changes.append(change)
            rows.append(f"| {name} | {case.name} | {before:.2f} | {after:.2f} | {100 * change:+.3f} |")
            print(rows[-1], file=sys.stderr)
        ok = [c for c in changes if math.isfinite(c)]
        mean = sum(ok) / len(ok) if ok else math.nan
        summary[name] = {"mean": mean, "worst": max(ok, default=math.nan), "best": min(ok, default=math.nan)}
        lines.append(f"| {name} | {len(changes)} | {100 * mean:+.3f} | {100 * max(ok, default=math.nan):+.3f} | "
                     f"{100 * min(ok, default=math.nan):+.3f} |")
    lines += ["", "## Per case", "", "| family | case | before | after | change (%) |", "|---|---|---|---|---|", *rows]
    publish("\n".join(lines) + "\n", args.out, figures={"summary": summary})
    return 0


if __name__ == "__main__":
    sys.exit(main())

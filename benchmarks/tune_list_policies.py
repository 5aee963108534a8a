"""Re-derive the V and interleaved list-policy sets on their own tuning cases (``benchmarks/cases.py``).

The sets ``V`` (``zb-v-greedy``), ``VM`` (``v-memory``'s list scheduler), ``VM_WIDE``'s run order and
``INTERLEAVED`` (the interleaved memory greedy) in ``solver/heuristics/listsched/policies.py`` were
chosen on cases that were not kept. This script chooses each again by a rule stated here before any
figure was looked at, on ``v_tuning()`` (V sets) or ``interleaved_tuning()`` (interleaved set) only.

What is scored: the heuristic alone, deterministically: each order timed by ``compact`` (as the
heuristics time them), objective value, no wall clock. A set's value on a case is the best of its
policies' orders and of the fixed orders the heuristic always runs beside them (``zb-v-greedy``:
ZB-V's order when it fits the cap; ``v-memory``: ZB-V's and ZB-V's with deferred Ws, no search;
interleaved: none). ``ref`` = the best value of the whole pool and those fixed orders on that case; a
case's excess is ``value / ref - 1`` (``PENALTY`` when nothing of the set runs; a case where nothing
of the pool runs either is left out and listed). The score of a set is its mean excess over the cases.

The rule for ``v-greedy``, ``v-memory`` and ``interleaved``: greedy forward selection over the whole
pool (the product grid of the policy dataclass's fields below; pool order breaks ties): add the policy
that lowers the score most; stop when the best addition gains less than ``MIN_GAIN`` or the set has
``MAX_SIZE[set]`` policies (the size of the set before, so ``auto``'s cost does not grow). The chosen
set is in selection order (best first).

The rule for ``v-wide`` (the run order of ``VM_WIDE``, the 96 policies that admit by memory alone):
rank them by their mean ratio ``value / best`` over the V tuning cases, ``best`` the best of the
``v-memory`` pool on the case (``PENALTY_RATIO`` when a policy gets stuck), ties by product order.

Revision (interleaved only, disclosed): the first run drew ``interleaved_tuning()``'s caps at 1p to 2p
of M_B and chose 8 policies there that no longer beat IZB's order at IZB's own peak (two tests of
tests/solver/test_interleaved_memory.py), the tight cap the greedy is for; the set was redrawn with caps
at 1 to 1.25 times IZB's peak before this run. The rule and the pool are unchanged.

    python benchmarks/tune_list_policies.py --set v-greedy|v-memory|v-wide|interleaved [--out FILE] [--cache FILE]

Results: ``benchmarks/results/tune_list_policies_<set>.md`` and its ``.json`` (``figures.chosen``: the
chosen set, or the run order as indices into ``VM_WIDE``).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pipesched.solver import Instance
from pipesched.solver.core.errors import NotApplicableError
from pipesched.solver.core.metrics import objective_value
from pipesched.solver.heuristics import interleaved_memory, v_greedy, v_memory
from pipesched.solver.heuristics.listsched.policies import (
    INTERLEAVED,
    V_WIDE_GRID_ORDER,
    VM,
    VM_WIDE,
    ILPolicy,
    V,
    VMPolicy,
    VPolicy,
)
from pipesched.solver.timing.retime import compact
from pipesched.solver.timing.simulate import DeadlockError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import Case, interleaved_tuning, v_tuning  # noqa: E402
from forward_select import forward_select  # noqa: E402
from report import command_line, publish  # noqa: E402

#: The sets before this re-derivation (1668ad5), chosen on cases not kept: for comparison, and for MAX_SIZE.
OLD = {
    "v-greedy": (
        VPolicy(1.0, None, "eager", ("F1", "B1", "F0", "B0")), VPolicy(1.0, None, "fits", ("F1", "B1", "F0", "B0")),
        VPolicy(1.0, None, "fits", ("B1", "F1", "F0", "B0")),
        VPolicy(1.0, None, "eager", ("B1", "F1", "F0", "B0"), extra=1), VPolicy(1.0, None, "eager", ("B1", "B0", "F1", "F0")),
    ),
    "v-memory": (VMPolicy(("B1", "F1", "F0", "B0"), None, "eager", None, True),
                 VMPolicy(("B0", "F1", "F0", "B1"), None, "eager", 1, True)),
    "interleaved": tuple(ILPolicy("seq", w, None, extra, lag, True) for lag in (1, 2) for w in ("fits", "eager")
                         for extra in (0, 1))
    + tuple(ILPolicy("warm-deep", w, None, extra, 1, alt) for alt in (True, False) for w in ("fits", "eager")
            for extra in (0, 1))
    + (ILPolicy("deep", "fits", None, 0), ILPolicy("deep", "fits", None, 1)),
}
OLD_WIDE_ORDER = (
    66, 14, 54, 55, 67, 39, 63, 71, 38, 62, 70, 15, 59, 35, 3, 2, 26, 27, 11, 10, 65, 36, 60, 68, 53, 51, 13,
    52, 69, 61, 24, 37, 64, 48, 1, 0, 49, 25, 34, 58, 12, 50, 9, 57, 33, 8, 32, 56, 22, 78, 30, 82, 42, 74, 6,
    18, 20, 76, 94, 86, 46, 90, 4, 16, 80, 72, 40, 28, 92, 44, 84, 88, 23, 79, 31, 43, 83, 7, 19, 75, 21, 77,
    5, 17, 73, 29, 41, 81, 47, 87, 95, 91, 45, 85, 93, 89,
)
#: Stop adding policies when the best addition lowers the mean excess by less than this (0.05 points).
MIN_GAIN = 5e-4
#: At most as many policies as the set had before (what ``auto`` is charged for stays the same).
MAX_SIZE = {name: len(pols) for name, pols in OLD.items()}
#: Excess of a set none of whose orders runs on a case (a stuck heuristic is worse than any slow order).
PENALTY = 1.0
#: A wide policy's ratio on a case where it gets stuck.
PENALTY_RATIO = 2.0
RESULTS = Path(__file__).parent / "results"

RANKS = tuple(itertools.permutations(("B1", "B0", "F1", "F0")))


def v_pool() -> list[VPolicy]:
    """``VPolicy``'s fields: warm-up scale 1 / 1.5 / 2, chunk-0 in-flight scale 0.5 / 0.75 / 1 / None
    (memory alone), both W rules, the 24 ranks, extra 0 / 1."""
    return [VPolicy(warm, steady, w, rank, extra) for warm in (1.0, 1.5, 2.0) for steady in (0.5, 0.75, 1.0, None)
            for w in ("fits", "eager") for rank in RANKS for extra in (0, 1)]


def vm_pool() -> list[VMPolicy]:
    """``VMPolicy``'s fields: the 24 ranks, hold None / 0 / 1, both W rules, extra 0 / 1 / None, with and
    without the turn's room (``VM_WIDE`` is its hold None, extra None part)."""
    return [VMPolicy(rank, hold, w, extra, turn) for rank in RANKS for hold in (None, 0, 1) for w in ("fits", "eager")
            for extra in (0, 1, None) for turn in (True, False)]


def il_pool() -> list[ILPolicy]:
    """``ILPolicy``'s fields: the forward rules (``shallow``, ``switch``, ``deep`` free; ``warm-deep``
    after IZB's warm-up; ``seq`` following the forward sequence at lag 1 or 2: the only combinations
    of forward rule and lag that differ), both W rules, hold None / 0, extra 0 / 1 / 2, alternate or not."""
    modes = [("shallow", None), ("switch", None), ("deep", None), ("warm-deep", 1), ("seq", 1), ("seq", 2)]
    return [ILPolicy(fwd, w, hold, extra, lag, alt) for fwd, lag in modes for w in ("fits", "eager")
            for hold in (None, 0) for extra in (0, 1, 2) for alt in (False, True)]


def _zb_v(inst: Instance) -> list[Any]:
    order = v_greedy._zb_v_within_cap(inst)
    return [] if order is None else [order]


def _zb_v_deferred(inst: Instance) -> list[Any]:
    base = v_memory._zb_v_base(inst)
    return [] if base is None else [base, v_memory.deferred_w_order(inst, base)]


#: Per set: cases, pool, the order of one policy, the fixed orders the heuristic runs beside the set.
FAMILIES: dict[str, tuple[Callable[[], list[Case]], Callable[[], list[Any]], Callable[..., Any],
                          Callable[[Instance], list[Any]]]] = {
    "v-greedy": (v_tuning, v_pool, v_greedy.v_order, _zb_v),
    "v-memory": (v_tuning, vm_pool, v_memory.vm_order, _zb_v_deferred),
    "v-wide": (v_tuning, vm_pool, v_memory.vm_order, lambda inst: []),
    "interleaved": (interleaved_tuning, il_pool, interleaved_memory.interleaved_order, lambda inst: []),
}


class Table:
    """One case's values of every pool policy and of the fixed orders, computed once (``inf``: stuck);
    ``cache`` keeps them across runs (they depend only on the code, the case and the policy)."""

    def __init__(self, case: Case, family: str, cache: dict[str, float]) -> None:
        self.case, self.inst, self._cache = case, Instance.from_problem(case.problem), cache
        _, _, self._order, fixed = FAMILIES[family]
        self.fixed = min((self._time(o) for o in fixed(self.inst)), default=math.inf)

    def _time(self, order: Any) -> float:
        return objective_value(self.inst, compact(self.inst, order))

    def value(self, pol: Any) -> float:
        key = f"{self.case.name}|{pol}"
        if key not in self._cache:
            try:
                self._cache[key] = self._time(self._order(self.inst, pol))
            except (DeadlockError, NotApplicableError):
                self._cache[key] = math.inf
        return self._cache[key]


def score(tables: Sequence[Table], refs: Sequence[float], chosen: Sequence[Any]) -> float:
    """Mean excess of the heuristic with set ``chosen`` (module docstring)."""
    xs = []
    for t, r in zip(tables, refs, strict=True):
        best = min([t.fixed, *(t.value(p) for p in chosen)])
        xs.append(PENALTY if math.isinf(best) else best / r - 1)
    return sum(xs) / len(xs)


def select(tables: Sequence[Table], refs: Sequence[float], pool: Sequence[Any],
           max_size: int) -> list[tuple[Any, float, float]]:
    """Greedy forward selection (:func:`forward_select`): [(policy, score after, gain)] in selection order."""
    return forward_select(lambda chosen: score(tables, refs, chosen), pool, [], max_size, MIN_GAIN)


def rank_wide(tables: Sequence[Table], refs: Sequence[float]) -> list[tuple[int, float]]:
    """(index into VM_WIDE, mean ratio) of the wide family, best first."""
    means = []
    for k, pol in enumerate(VM_WIDE.policies):
        rs = [t.value(pol) / r if not math.isinf(t.value(pol)) else PENALTY_RATIO for t, r in zip(tables, refs,
                                                                                                      strict=True)]
        means.append((sum(rs) / len(rs), k))
    means.sort()
    return [(k, m) for m, k in means]


def _plain(pol: Any) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(pol).items()}


def report(family: str, tables: list[Table], dropped: list[str], refs: list[float], pool: list[Any],
           argv: list[str] | None) -> tuple[str, dict[str, Any]]:
    before = OLD.get(family)
    current = {"v-greedy": V, "v-memory": VM, "interleaved": INTERLEAVED}.get(family)
    head = [f"# List policies re-derived: {family}", "",
            f"Made by `{command_line('tune_list_policies.py', argv)}`. Rule (stated before the figures, see the "
            "script's docstring): "
            + ("rank `VM_WIDE` by mean ratio to the best of the v-memory pool " if family == "v-wide" else
               f"greedy forward selection over the {len(pool)}-policy pool, min gain {100 * MIN_GAIN:g} points, "
               f"at most {MAX_SIZE.get(family)} policies ")
            + f"on {len(tables)} tuning cases (`benchmarks/cases.py`, "
            f"`{'interleaved_tuning' if family == 'interleaved' else 'v_tuning'}()`). These cases chose the set: "
            "figures on them are tuning-influenced.", ""]
    if family == "interleaved":
        head += ["Revision: the first run's interleaved caps were 1p to 2p of M_B; redrawn at 1 to 1.25 times "
                 "IZB's peak (the script's docstring says why). Same rule and pool.", ""]
    if dropped:
        head += [f"Left out (no pool policy runs): {', '.join(dropped)}.", ""]
    if family == "v-wide":
        ranked = rank_wide(tables, refs)
        same = "yes" if tuple(k for k, _ in ranked) == V_WIDE_GRID_ORDER else "NO"
        lines = head + [f"`policies.py`'s `V_WIDE_GRID_ORDER` is this order: {same}.", "",
                        "| run # | VM_WIDE index | policy | mean ratio |", "|---|---|---|---|",
                        *(f"| {i} | {k} | `{VM_WIDE.policies[k]}` | {m:.5f} |" for i, (k, m) in enumerate(ranked))]
        return "\n".join(lines) + "\n", {"chosen": [k for k, _ in ranked], "before": list(OLD_WIDE_ORDER)}
    assert before is not None
    trace = select(tables, refs, pool, MAX_SIZE[family])
    chosen = [p for p, _, _ in trace]
    old, new = score(tables, refs, before), score(tables, refs, chosen)
    lines = head + ["## Chosen set (selection order)", "", "| # | policy | mean excess after (%) | gain (points) |",
                    "|---|---|---|---|",
                    *(f"| {k} | `{p}` | {100 * s:.3f} | {100 * g:.3f} |" for k, (p, s, g) in enumerate(trace)), "",
                    f"`policies.py` holds this set: {'yes' if current and current.policies == tuple(chosen) else 'NO'}.",
                    "",
                    f"Mean excess (tuning-influenced): set before {100 * old:.3f}%, chosen set {100 * new:.3f}%; "
                    f"the fixed orders alone {100 * score(tables, refs, []):.3f}%.", "",
                    "## Per case (tuning-influenced)", "", "| case | ops | ref | before | chosen |", "|---|---|---|---|---|"]
    for t, r in zip(tables, refs, strict=True):
        b = min([t.fixed, *(t.value(p) for p in before)])
        c = min([t.fixed, *(t.value(p) for p in chosen)])
        lines.append(f"| {t.case.name} | {t.inst.num_ops} | {r:.2f} | {b:.2f} | {c:.2f} |")
    return "\n".join(lines) + "\n", {"chosen": [_plain(p) for p in chosen], "before": [_plain(p) for p in before]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=tuple(FAMILIES), required=True)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--cache", type=Path, help="JSON file of policy values, read if present, written at the end")
    ap.add_argument("--cases", type=int, help="only the first N cases (a timing check; results not kept)")
    args = ap.parse_args(argv)
    out = args.out or RESULTS / f"tune_list_policies_{args.set}.md"
    cache: dict[str, float] = json.loads(args.cache.read_text()) if args.cache and args.cache.exists() else {}
    cases, pool_of, _, _ = FAMILIES[args.set]
    pool = pool_of()
    tables, refs, dropped = [], [], []
    try:
        for case in cases()[:args.cases]:
            t = Table(case, args.set, cache)
            ref = min([t.fixed, *(t.value(p) for p in pool)])
            print(f"  {case.name}: ref {ref:.2f}", file=sys.stderr)
            if math.isinf(ref):
                dropped.append(case.name)
            else:
                tables.append(t)
                refs.append(ref)
    finally:
        if args.cache:
            args.cache.write_text(json.dumps(cache))
    text, figures = report(args.set, tables, dropped, refs, pool, argv)
    if args.cases is None:
        publish(text, out, figures=figures)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

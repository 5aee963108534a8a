"""Every list policy's per-device orders on the tuning set: the check that a list-scheduler refactor
changes no order (``benchmarks/answers.py`` compares objectives; two orders can tie on those).

    python benchmarks/list_orders.py -o before.json              # on the old commit
    python benchmarks/list_orders.py -o after.json               # on the new one
    python benchmarks/list_orders.py --compare before.json after.json
    python benchmarks/list_orders.py --time                      # seconds per policy set, best of --repeat

Cases: the tuning set of ``benchmarks/cases.py``. Sets: ``greedy`` (every policy of method ``greedy``),
``zb`` (the zero-bubble grid as ``policies(inst)`` sizes it without a budget), ``v`` (``zb-v-greedy``),
``vm`` and ``vm-wide`` (``v-memory``'s grid and its wide grid), ``deferred-w`` (ZB-V's order with its Ws
deferred, both W rules), ``il`` (the interleaved memory greedy). Each order is stored as the SHA-256 of
its text (``--full`` keeps the text); a policy that deadlocks or does not apply is stored as such.
Nothing here is a figure to quote: ``--time`` on a shared machine is only a ratio between two runs made
side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import tuning  # noqa: E402

from pipesched.solver.core.errors import NotApplicableError  # noqa: E402
from pipesched.solver.core.instance import Instance  # noqa: E402
from pipesched.solver.core.schedule import Order  # noqa: E402
from pipesched.solver.heuristics import greedy, interleaved_memory, v_greedy, v_memory, zb_policies  # noqa: E402
from pipesched.solver.heuristics.classic.zb_v import zb_v_order  # noqa: E402
from pipesched.solver.heuristics.zero_bubble import zb_order  # noqa: E402
from pipesched.solver.timing.simulate import DeadlockError  # noqa: E402

Run = Callable[[], Order]


def _deferred(inst: Instance) -> Iterator[tuple[str, Run]]:
    if not v_memory.applies(inst) or not inst.split_backward:
        return
    base = zb_v_order(inst)
    for w in ("fits", "eager"):
        yield w, lambda w=w: v_memory.deferred_w_order(inst, base, w)


def policy_runs(inst: Instance) -> dict[str, list[tuple[str, Run]]]:
    """Per policy set, (policy name, the call that builds its order) for every policy that applies."""
    sets: dict[str, list[tuple[str, Run]]] = {
        "greedy": [(name, lambda name=name: greedy.greedy_order(inst, policy=name)) for name in greedy.POLICIES],
        "zb": [] if inst.dual else [(repr(pol), lambda pol=pol: zb_order(inst, pol)) for pol in zb_policies.policies(inst)],
    }
    if inst.placement == "v" and inst.stages_per_device == 2:
        sets["v"] = [(repr(pol), lambda pol=pol: v_greedy.v_order(inst, pol)) for pol in v_greedy.POLICIES]
    if v_memory.applies(inst):
        sets["vm"] = [(repr(pol), lambda pol=pol: v_memory.vm_order(inst, pol)) for pol in v_memory.POLICIES]
        sets["vm-wide"] = [(repr(pol), lambda pol=pol: v_memory.vm_order(inst, pol)) for pol in v_memory.WIDE_GRID]
        sets["deferred-w"] = list(_deferred(inst))
    if interleaved_memory.applies(inst):
        sets["il"] = [(repr(pol), lambda pol=pol: interleaved_memory.interleaved_order(inst, pol))
                      for pol in interleaved_memory.POLICIES]
    return sets


def _text(order: Order) -> str:
    return "\n".join(" ".join(f"{op.kind}{op.stage}.{op.microbatch}" for op in ops) for ops in order)


def _result(run: Run, full: bool) -> str:
    try:
        text = _text(run())
    except DeadlockError:
        return "deadlock"
    except NotApplicableError:
        return "not applicable"
    return text if full else hashlib.sha256(text.encode()).hexdigest()


def orders(full: bool = False, only: set[str] | None = None) -> dict[str, Any]:
    """{case: {set: {policy: order hash (or text, or 'deadlock')}}}."""
    out: dict[str, Any] = {}
    for case in tuning():
        inst = Instance.from_problem(case.problem)
        out[case.name] = {name: {pol: _result(run, full) for pol, run in runs}
                          for name, runs in policy_runs(inst).items() if only is None or name in only}
    return out


def timings(repeat: int, only: set[str] | None = None) -> dict[str, float]:
    """Seconds per policy set over the whole tuning set (every policy once), best of ``repeat``."""
    insts = [Instance.from_problem(case.problem) for case in tuning()]
    best: dict[str, float] = {}
    for _ in range(repeat):
        spent: dict[str, float] = {}
        for inst in insts:
            for name, runs in policy_runs(inst).items():
                if only is not None and name not in only:
                    continue
                t0 = time.perf_counter()
                for _pol, run in runs:
                    with contextlib.suppress(DeadlockError, NotApplicableError):
                        run()
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - t0
        best = {k: min(v, best.get(k, v)) for k, v in spent.items()}
    return {k: round(v, 3) for k, v in best.items()}


def compare(before: dict[str, Any], after: dict[str, Any]) -> int:
    """Print every order that differs; 0 when none does."""
    diffs = 0
    for case in sorted(set(before) | set(after)):
        a, b = before.get(case, {}), after.get(case, {})
        for name in sorted(set(a) | set(b)):
            for pol in sorted(set(a.get(name, {})) | set(b.get(name, {}))):
                x, y = a.get(name, {}).get(pol), b.get(name, {}).get(pol)
                if x != y:
                    diffs += 1
                    print(f"DIFF {case} {name} {pol}: {str(x)[:16]} -> {str(y)[:16]}")
    count = sum(len(pols) for sets in before.values() for pols in sets.values())
    print(f"{count} orders before, {diffs} differ")
    return 1 if diffs else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--out", type=Path, help="write the JSON here (default: stdout)")
    ap.add_argument("--full", action="store_true", help="the orders' text, not their hashes")
    ap.add_argument("--sets", nargs="*", help="only these policy sets")
    ap.add_argument("--time", action="store_true", help="seconds per policy set instead of the orders")
    ap.add_argument("--repeat", type=int, default=3, help="with --time: best of this many runs")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*(json.loads(p.read_text()) for p in args.compare))
    only = set(args.sets) if args.sets else None
    data: Any = timings(args.repeat, only) if args.time else orders(args.full, only)
    text = json.dumps(data, indent=1, sort_keys=True)
    if args.out:
        args.out.write_text(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

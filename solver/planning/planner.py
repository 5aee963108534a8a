"""``plan(model, cluster)``: choose the split, the recompute flags and the schedule together.

A decomposition: candidate splits are scheduled by an ordinary method, the best kept.

1. **Rules** (:mod:`.split`): the balanced DP, for v >= 2 the chunk-capped and device-balanced splits,
   the split the lower bound's stage windows favour (:func:`.bound.window_split`: the ramp in view),
   under the V placement the one its V-turn term favours (:func:`.v_turn_window.v_turn_split`),
   the AdaPipe-style DP and the uniform, torchtitan and Megatron rules, and each of them that recomputes
   again with per-layer recompute (:func:`.partial.thinned`: only the layers the estimate needs), and
   under a cap the balanced DP with Little's law's in-flight counts and per-layer recompute
   (:func:`.paced.paced`) when its split bound is under every other rule's; each distinct split is induced
   (:mod:`.induce`) and solved with the same method and the same time share, so the baselines are
   measured exactly like the plan. Splits are solved least lower bound first
   (:func:`.bound.split_bound`, raised to the solver's analytic bound of the split's problem).
2. **Local moves** from the best schedule: on the two busiest devices (sum of their ops' durations: the
   device on the critical path of a pipeline is its busiest one up to the ramp), move the first or last
   layer of each of their stages to the neighbouring stage, turn off the recompute of any stage (the
   rules size memory by an estimate; the exact limit may allow it) and turn it on for the stages of
   devices whose peak is at their limit (their schedule may be waiting for memory), and per-layer
   recompute counts one layer or half of them up or down (:func:`.partial.count_moves`). Moves whose split
   bound is not below the best step are pruned (they cannot win; the cheap bound first, then the
   analytic one); the rest are solved least bound first, :data:`PLAN_MAX_MOVES` a round, and the best
   move is kept. A round that does not improve goes on with the next moves by bound; once none is left,
   with the boundary moves of every device (not only the two busiest), until none is left there either
   or the nominal budget runs out; those wide rounds also offer, under a memory cap, the memory-free
   balanced, device-balanced and window splits without recompute (:meth:`_Search.unestimated`: the
   rules' memory estimate may overstate what a split needs). Every round also offers the
   **bound-guided splits** (:mod:`.survivors`): the splits whose cheap bounds stay under the rules'
   best step, least relaxed-Problem bound first (splits no rule and no walk reaches): half of the first
   round, then one a round beside the moves, all of a round once no move is left.
3. **Polish**: the best split again with all the nominal time left, its schedule as the hint (unless
   proven): nothing follows it, and the wall net below, not a held-back half, absorbs an overrun.
4. **Microbatches**: with a list of counts each gets an equal share of the time and the count with the
   least time per microbatch (``step_time / m``: layer costs are per microbatch) is kept.

Time: every decision reads a *nominal* budget (``PLAN_SAFETY * time_limit_s / PLAN_OVERRUN`` seconds of
solver limits, :mod:`pipesched.solver.budget`), charged per solve, never the clock, so a model and a limit
give the same plan on any load (``auto`` itself is deterministic below its wall net). The wall clock is
a net: past ``PLAN_SAFETY * time_limit_s`` no optional solve starts and ``Plan.wall_cut`` says so. A
solve whose method's own wall net cut a phase (``auto`` on a loaded machine) is run once more when the
net leaves room (charged once); if it is cut again, or there is no room, ``Plan.solves_cut`` counts it.

``lower_bound`` (:mod:`.bound`) holds for every split, so ``status`` is ``optimal`` only when the plan
meets it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from pipesched.solver import (
    Instance,
    NotApplicableError,
    Problem,
    Schedule,
    SolveOptions,
    get_method,
    solve,
)
from pipesched.solver.bounds.analytic import lower_bound
from pipesched.solver.budget import records_wall_cuts, wall_cuts
from pipesched.solver.budget.planning import (
    PLAN_MAX_MOVES,
    PLAN_MIN_SHARE_S,
    PLAN_MOVE_S,
    PLAN_NOMINAL_S,
    PLAN_OVERRUN,
    PLAN_PROVEN_S,
    PLAN_SAFETY,
    PLAN_SURVIVORS_S,
)

from .bound import plan_lower_bound, split_bound, window_split
from .exports import ModuleNames, megatron_layout, torchtitan_fqns
from .induce import InfeasibleSplit, Split, induce, model_infeasibility, stage_devices
from .model import Cluster, ExpandedLayer, Model, Units
from .paced import paced
from .partial import count_moves, thinned
from .plan import Baseline, Exports, Plan, PlanStage
from .split import (
    SplitContext,
    adapipe,
    balanced,
    chunk_balanced,
    device_balanced,
    least_recompute,
    megatron,
    min_max_cap,
    torchtitan,
    uniform,
)
from .sums import recompute_order, stage_sums
from .survivors import ranked
from .v_turn_window import v_turn_split

BASELINES = ("uniform", "torchtitan", "megatron", "adapipe")


@dataclass
class Candidate:
    split: Split
    problem: Problem | None = None
    bound: float = math.inf  # a lower bound of its problem: no schedule of this split is faster
    strong: bool = False  # whether ``bound`` includes the solver's analytic bound
    schedule: Schedule | None = None
    reason: str | None = None
    not_applicable: bool = False

    @property
    def step(self) -> float:
        s = self.schedule
        return s.objective_value if s is not None and s.ops and s.objective_value is not None else math.inf


@records_wall_cuts
def _solve_noting_cuts(problem: Problem, method: str, options: SolveOptions) -> tuple[Schedule, bool]:
    """``solve``, and whether the method's own wall-clock net cut one of its phases (then its answer
    depends on the machine's load: 70B p = 16 planned 1387.9 instead of 1376.1 once when ``auto``'s
    net cut the heuristics of the split that meets the bound, at load 8)."""
    found = solve(problem, method, options)
    return found, bool(wall_cuts())


class _Search:
    """Candidates of one microbatch count, each split induced once and solved at most twice (once, and
    the best again with the time left and its schedule as the hint)."""

    def __init__(self, layers: list[ExpandedLayer], cluster: Cluster, m: int, method: str, budget: float,
                 wall: float, floor: float = 0.0, units: Units | None = None) -> None:
        self.layers, self.cluster, self.m, self.method = layers, cluster, m, method
        self.units = units  # the model's, labels on every induced Problem
        self.floor = floor  # the bound over all splits: a step meeting it ends the search
        self.ctx = SplitContext.of(layers, cluster, m)
        self.seen: dict[Split, Candidate] = {}
        self.budget = budget  # nominal seconds: every decision below reads these, never the clock
        self.spent = 0.0  # nominal seconds charged so far
        self.deadline = time.perf_counter() + wall  # the wall-clock net only
        self.wall_cut = False  # the net stopped the search before its nominal budget ran out
        self.solves_cut = 0  # solves a method's own wall net cut (after one more run where there was room)
        self._unestimated: list[Split] | None = None
        self._guided: list[Split] | None = None
        self._guided_round = True  # the first round of moves is the bound-guided splits'

    def left(self) -> float:
        """Nominal seconds left (deterministic: the same model and limit always see the same values)."""
        return self.budget - self.spent

    def going(self) -> bool:
        """Whether to start another optional solve: nominal time is left and the wall net has not passed
        (a machine much slower than :data:`PLAN_OVERRUN` assumes; then the plan says so)."""
        if self.left() <= PLAN_MIN_SHARE_S:
            return False
        if time.perf_counter() >= self.deadline:
            self.wall_cut = True
            return False
        return True

    def prepare(self, split: Split) -> Candidate:
        if split not in self.seen:
            c = self.seen[split] = Candidate(split)
            try:
                c.problem = induce(self.layers, self.cluster, split, self.m, self.units)
                c.bound = split_bound(c.problem)
            except InfeasibleSplit as e:
                c.reason = str(e)
        return self.seen[split]

    def strengthen(self, c: Candidate) -> Candidate:
        """Raise ``c.bound`` to the solver's analytic bound of its problem (about 0.1 s at 3000 ops, so
        only for candidates about to be ranked for solving)."""
        if c.problem is not None and not c.strong:
            c.bound, c.strong = max(c.bound, lower_bound(Instance.from_problem(c.problem))), True
        return c

    def solve(self, c: Candidate, limit: float, hint: Schedule | None = None) -> Candidate:
        """Solve ``c`` with the nominal limit ``limit`` and charge it (a proof ends a solve at once, so
        a proven one is charged only :data:`PLAN_PROVEN_S`)."""
        if c.problem is None or (c.schedule is not None and hint is None):
            return c
        nominal = max(limit, PLAN_MIN_SHARE_S)
        room = self.deadline - time.perf_counter()
        if room < nominal:  # the wall net: this solve would end past the deadline even at nominal speed
            nominal, self.wall_cut = max(room, PLAN_MIN_SHARE_S), True
        options = SolveOptions(time_limit_s=nominal, hint=hint)
        try:
            found, cut = _solve_noting_cuts(c.problem, self.method, options)
            if cut and time.perf_counter() + PLAN_OVERRUN * nominal < self.deadline:  # once more, if the net allows:
                # the answer the nominal budget gives on a machine that keeps up
                again, cut = _solve_noting_cuts(c.problem, self.method, options)
                found = again if again.ops or not found.ops else found
            self.solves_cut += cut
        except NotApplicableError as e:
            c.reason, c.not_applicable = str(e), True
            self.spent += PLAN_PROVEN_S
            return c
        self.spent += min(nominal, PLAN_PROVEN_S) if found.status in ("optimal", "infeasible") else nominal
        if c.schedule is None or (found.ops and found.objective_value < c.step):
            c.schedule, c.reason = found, found.reason
        return c

    def share(self, count: int, most: float) -> float:
        """Nominal seconds for each of ``count`` solves: an equal part of what is left, at most ``most``
        (breadth wins: the search is many short steps) and at least :data:`PLAN_MIN_SHARE_S`."""
        return max(PLAN_MIN_SHARE_S, min(most, self.left() / max(count, 1)))

    def rules(self) -> dict[str, Split | None]:
        ctx, layers = self.ctx, self.layers
        bal = balanced(ctx)
        turn = v_turn_split(layers, self.cluster, self.m)  # V placement under a cap, else None
        out = {"balanced": bal, "chunks": chunk_balanced(ctx), "devices": device_balanced(ctx, bal),
               "windows": ctx.with_recompute(window_split(layers, self.cluster, self.m)),
               "turn": ctx.with_recompute(turn) if turn is not None else None,
               "adapipe": adapipe(ctx), "uniform": uniform(ctx, layers), "torchtitan": torchtitan(ctx, layers),
               "megatron": megatron(ctx, layers)}
        for name, split in list(out.items()):  # per-layer recompute: only the layers the estimate needs
            out[f"{name}, per layer"] = thinned(ctx, split)
        out["paced"] = self.paced([x for x in out.values() if x is not None])  # per-layer counts already
        if all(s is None for s in out.values()):  # the estimate fits nothing: let the exact limit decide
            free = SplitContext.of(layers, self.cluster.model_copy(update={"memory_per_device": None}), self.m)
            found = least_recompute(free, min_max_cap(free))
            if found is not None:
                b = found[0].bounds
                out["balanced"] = Split.of(b, [free.table.can_recompute(b[s], b[s + 1]) for s in range(free.S)])
        return out

    def paced(self, rules: list[Split]) -> Split | None:
        """The paced split (:mod:`.paced`: Little's law's in-flight counts at the bound over all splits),
        offered only when its split bound is under every other rule's: an extra rule takes a share of
        the budget from the baselines (8B s = 8k p = 8 tight at 10 s: its paced split schedules at
        6476.5 and the walk then lacked the time that found 6206.5), so it must find what they cannot."""
        found = paced(self.layers, self.ctx, self.floor)[0]
        if found is None:
            return None
        others = [self.strengthen(self.prepare(s)).bound for s in rules]
        fresh = found not in self.seen
        if self.strengthen(self.prepare(found)).bound < min(others, default=math.inf):
            return found
        if fresh:  # not offered: the walk may still reach it
            del self.seen[found]
        return None

    def neighbours(self, best: Candidate, wide: bool = False) -> list[Split]:
        """Local moves of boundary layers off the busiest devices (``wide``: off every device), recompute
        turned off, and turned on where a device's memory peak is at its limit (the schedule may be
        waiting for memory)."""
        b, rc, S, part = list(best.split.bounds), best.split.recompute, self.ctx.S, best.split.partial
        busy = [0.0] * self.cluster.devices
        for op in best.schedule.ops if best.schedule else []:
            busy[op.device] += op.end - op.start
        where = stage_devices(self.cluster)
        out: list[Split] = []
        for d in sorted(range(self.cluster.devices), key=lambda d: -busy[d])[:None if wide else 2]:
            for s in (s for s in range(S) if where[s] == d and b[s + 1] - b[s] >= 2):
                for edge, step in ((s, 1), (s + 1, -1)):
                    if 0 < edge < S:
                        moved = b.copy()
                        moved[edge] += step
                        out.append(Split.of(moved, rc, part))
                        refit = self.ctx.with_recompute(moved)
                        if refit is not None:
                            out.append(refit)
        out += [Split.of(b, [f and t != s for t, f in enumerate(rc)], part) for s in range(S) if rc[s]]
        limit = best.problem.memory.limit if best.problem is not None else None
        if isinstance(limit, list) and best.schedule is not None:  # memory-bound devices: recompute more
            full = [d for d, peak in enumerate(best.schedule.peak_memory) if peak >= 0.98 * limit[d]]
            out += [Split.of(b, [f or t == s for t, f in enumerate(rc)], part) for s in range(S)
                    if where[s] in full and not rc[s] and self.ctx.table.can_recompute(b[s], b[s + 1])]
            out += count_moves(self.ctx, best.split, set(full))
        else:
            out += count_moves(self.ctx, best.split, set())
        if wide:  # stuck: farther splits too
            out += self.unestimated()
        return [x for x in dict.fromkeys(out) if x not in self.seen]

    def promising(self, splits: list[Split], step: float) -> list[Candidate]:
        """The splits not solved yet whose bound is below ``step`` (the others cannot win), least bound
        first: the cheap bound for all, the analytic one for the :data:`PLAN_MAX_MOVES` x 3 least."""
        cheap = sorted((c for c in map(self.prepare, dict.fromkeys(x for x in splits if x not in self.seen))
                        if c.bound < step * (1 - 1e-9)), key=lambda c: c.bound)[:3 * PLAN_MAX_MOVES]
        return sorted((c for c in map(self.strengthen, cheap) if c.bound < step * (1 - 1e-9)), key=lambda c: c.bound)

    def guided(self, target: float) -> list[Split]:
        """The bound-guided splits (:func:`.survivors.ranked`) under the first ``target`` asked (the
        rules' best step), each plain, with the recompute the memory estimate needs, and thinned to
        per-layer counts; built once, charged :data:`PLAN_SURVIVORS_S` nominal seconds."""
        if self._guided is None:
            self.spent += PLAN_SURVIVORS_S
            self._guided = []
            for b in ranked(self.layers, self.cluster, self.m, target, self.floor):
                fitted = self.ctx.with_recompute(b)
                self._guided += [x for x in (Split.of(b), fitted, thinned(self.ctx, fitted)) if x is not None]
        return self._guided

    def unestimated(self) -> list[Split]:
        """Under a memory cap, the memory-free balanced, device-balanced and window splits without
        recompute: the 1F1B estimate may overstate what a split needs, and the exact limit decides
        (8B V=32k v=2 loop at 80 GiB: 4953.9, proven optimal for its split, where the estimate's
        splits gave 5048.3). Offered in the wide rounds, ranked by their split bound like the moves."""
        if self.cluster.memory_per_device is None:
            return []
        if self._unestimated is None:  # the same every round: built once
            loose = SplitContext.of(self.layers, self.cluster.model_copy(update={"memory_per_device": None}), self.m)
            plain, loose_bal = [False] * self.ctx.S, balanced(loose)
            found = [loose_bal, device_balanced(loose, loose_bal)]
            self._unestimated = [Split.of(x.bounds, plain) for x in found if x is not None] + [
                Split.of(window_split(self.layers, self.cluster, self.m), plain)]
        return self._unestimated

    def run(self) -> tuple[Candidate | None, dict[str, Candidate | None]]:
        """Rules first (all solved: they are the baselines), least split bound first; then local moves
        whose bound beats the best step, least bound first; then the best again with the time left."""
        rules = self.rules()
        todo = sorted((self.strengthen(self.prepare(s)) for s in dict.fromkeys(x for x in rules.values() if x is not None)),
                      key=lambda c: c.bound)
        for k, c in enumerate(todo):  # all of them, however little is left: they are the baselines
            self.solve(c, self.share(len(todo) - k, PLAN_NOMINAL_S) if self.going() else PLAN_MIN_SHARE_S)
        named = {name: (self.seen[s] if s is not None else None) for name, s in rules.items()}
        best = min(self.seen.values(), key=lambda c: c.step, default=None)
        wide = False  # a round that does not improve moves on to the next moves, then to every device's
        while best is not None and self.floor * (1 + 1e-9) < best.step < math.inf and self.going():
            local = self.promising(self.neighbours(best, wide), best.step)
            guided = self.promising(self.guided(best.step), best.step)
            # bound-guided splits: half of the first round after the rules, then one a round beside the
            # local moves (they must not starve the walk), all of a round when no move is left
            first = self._guided_round
            self._guided_round = False
            pool = guided[:PLAN_MAX_MOVES // 2 if first else 1] + local if local else guided
            moves = list({c.split: c for c in pool}.values())[:PLAN_MAX_MOVES]
            if not moves:
                if wide:
                    break
                wide = True
                continue
            tried = [self.solve(c, self.share(len(moves) - k, PLAN_MOVE_S)) for k, c in enumerate(moves) if self.going()]
            better = min(tried, key=lambda c: c.step, default=best)
            if better.step < best.step * (1 - 1e-9):
                best, wide = better, False
        if best is not None and best.step > best.bound * (1 + 1e-9) and self.going():
            self.solve(best, self.left(), hint=best.schedule)
        return best, named


def _stages(cluster: Cluster, split: Split, layers: list[ExpandedLayer]) -> list[PlanStage]:
    where, b = stage_devices(cluster), split.bounds

    def chosen(s: int) -> list[int] | None:
        count = split.count(s)
        return None if count is None else sorted(recompute_order(layers, b[s], b[s + 1])[:count])

    return [PlanStage(stage=s, device=where[s], layers=(b[s], b[s + 1]), recompute=split.recompute[s],
                      recompute_layers=chosen(s)) for s in range(split.num_stages)]


def _peak_memory(layers: list[ExpandedLayer], cluster: Cluster, split: Split, schedule: Schedule) -> list[float]:
    """Static memory plus the schedule's peak (recompute transients included, as the validator sees them)."""
    where = stage_devices(cluster)
    sums = [stage_sums(layers, split.bounds[s], split.bounds[s + 1], split.recompute[s], split.count(s))
            for s in range(split.num_stages)]
    return [schedule.peak_memory[d] + math.fsum(sums[s].static for s in range(len(sums)) if where[s] == d)
            for d in range(cluster.devices)]


def _infeasible(model: Model, cluster: Cluster, method: str, reason: str, t0: float) -> Plan:
    return Plan(model=model, cluster=cluster, method=method, status="infeasible", reason=reason,
                solve_time_s=round(time.perf_counter() - t0, 6))


def plan(model: Model, cluster: Cluster, method: str = "auto", time_limit_s: float = 10.0, *,
         names: ModuleNames | None = None) -> Plan:
    """The best split, recompute flags and schedule found within about ``time_limit_s`` seconds."""
    t0 = time.perf_counter()
    get_method(method)  # an unknown name is an input error before any work
    layers = model.expanded()
    if len(layers) < cluster.num_stages:
        return _infeasible(model, cluster, method, f"the model has {len(layers)} layers, fewer than the "
                           f"{cluster.num_stages} stages (devices x stages_per_device)", t0)
    reason = model_infeasibility(layers, cluster)
    if reason:
        return _infeasible(model, cluster, method, reason, t0)
    choices = cluster.microbatch_choices()
    results = []
    bounds = {m: plan_lower_bound(layers, cluster, m) for m in choices}
    nominal = PLAN_SAFETY * time_limit_s / PLAN_OVERRUN / len(choices)  # per count, from the limit only
    for k, m in enumerate(choices):  # the bounds' wall time counts against the net
        wall = PLAN_SAFETY * time_limit_s - (time.perf_counter() - t0)
        search = _Search(layers, cluster, m, method, nominal, max(wall / (len(choices) - k), PLAN_MIN_SHARE_S),
                         floor=bounds[m].value, units=model.units)
        best, named = search.run()
        results.append((m, search, best, named))
    found = [r for r in results if r[2] is not None and r[2].step < math.inf]
    if not found:
        tried = [c for r in results for c in r[1].seen.values()]
        if tried and all(c.not_applicable for c in tried):
            raise NotApplicableError(tried[0].reason or f"method {method!r} does not apply")
        why = next((c.reason for c in tried if c.reason), "no split fits the devices' memory")
        unproven = [c for c in tried if c.schedule is not None and c.schedule.status != "infeasible"]
        if unproven:  # a split fits but its solve found nothing in time: not proven infeasible
            return _infeasible(model, cluster, method, f"no schedule found in time ({unproven[0].reason or 'timeout'})",
                               t0).model_copy(update={"status": "timeout"})
        return _infeasible(model, cluster, method, why, t0)
    m, search, best, named = min(found, key=lambda r: r[2].step / r[0])
    bound, step = bounds[m], best.step
    baselines = [Baseline(name=name, stages=_stages(cluster, c.split, layers) if c else [],
                          step_time=c.step if c and c.step < math.inf else None,
                          status=(c.schedule.status if c and c.schedule and c.schedule.ops else "infeasible"),
                          reason=None if c and c.step < math.inf else
                          (c.reason if c else "no split of this rule fits the memory estimate"))
                 for name, c in named.items() if name in BASELINES]
    exports = Exports(megatron_layout=megatron_layout(layers, best.split.bounds),
                      torchtitan_module_fqns=torchtitan_fqns(layers, best.split.bounds, names))
    return Plan(model=model, cluster=cluster, method=method,
                status="optimal" if step <= bound.value * (1 + 1e-9) + 1e-9 else "feasible",
                microbatches=m, stages=_stages(cluster, best.split, layers), problem=best.problem,
                schedule=best.schedule, step_time=step,
                lower_bound=min(bound.value, step),  # equal up to the 12-digit tidying of stage sums
                lower_bound_derivation=bound.derivation,
                peak_memory=_peak_memory(layers, cluster, best.split, best.schedule), baselines=baselines,
                exports=exports, candidates=sum(len(r[1].seen) for r in results),
                wall_cut=any(r[1].wall_cut for r in results), solves_cut=sum(r[1].solves_cut for r in results),
                solve_time_s=round(time.perf_counter() - t0, 6))

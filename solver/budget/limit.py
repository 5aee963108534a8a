"""How ``auto`` uses all of its limit: the canonical limit, the counted idle rates and the windows' sizes.

Why apart from :mod:`pipesched.solver.budget`: these numbers belong to one design
(:mod:`pipesched.solver.portfolio.lns`): the phases before the final one are budgeted as at
``min(limit, CANONICAL_LIMIT_S)``, every search is *counted* the idle-machine seconds its deterministic
time stands for, and the final phase re-solves windows of the incumbent until the counted seconds
reach the limit. ``python benchmarks/limit_use.py`` measures what a limit buys and how much of it is
used; ``python benchmarks/limit_use.py --rates`` re-derives the idle rates.
"""

from __future__ import annotations

from . import SHARED_SLOWDOWN
from .clock import Budget

#: Above this limit the phases before the windows are budgeted as at this limit, so their answer is the
#: same for every larger limit and a larger limit only adds windows: a larger limit never returns a
#: worse answer (policy: the limit the tuning set's answers are checked at, ``benchmarks/answers.py``;
#: at 60 s the heuristics then search as at 10 s and the windows get the rest).
CANONICAL_LIMIT_S = 10.0

#: Deterministic units CP-SAT's clock advances per CPU second (one thread of an idle core), by kind of
#: model: what a full-model search is *counted* (:func:`pipesched.solver.exact.cpsat.run.counted_seconds`:
#: its units over this rate times its threads). Measured over every CP-SAT solve of ``auto`` on tuning
#: cases, per CPU second (the idle-machine equivalent, whatever the load), by ``python
#: benchmarks/limit_use.py --rates``: models with neither a memory resource nor exact memory chains,
IDLE_DTIME_PER_SECOND = 1.0
#: of precedence-only models (memory caps as exact chains; no LP),
#: measured like :data:`IDLE_DTIME_PER_SECOND` (``python benchmarks/limit_use.py --rates``),
IDLE_PRECEDENCES_DTIME_PER_SECOND = 0.15
#: and of models with a memory cumulative or reservoir, measured the same way: 0.46 over the full-model
#: searches of six tuning cases at 10 s and 60 s, two workers with the LP, 0.59 at 2 s and 10 s
#: (``python benchmarks/limit_use.py --rates``).
IDLE_RESOURCE_DTIME_PER_SECOND = 0.45

#: The same for a search on one worker without the linear relaxation (every window, and the full search
#: when its plan is below the root set-up cost): a window of ``s`` nominal seconds gets ``s`` times this
#: many units and is counted its units over it, its set-up apart (below). Measured by ``python
#: benchmarks/limit_use.py --rates`` (rows "no LP, 1 worker"): 47.6 units in 120.8 CPU s over 304 windows
#: of six tuning cases, about half of it their set-up, so about 0.8 per CPU second of search; single
#: solves range from 0.14 (a 768-op stage-span model with a memory cumulative) to 1.07 (the full search
#: of a 1536-op makespan one).
WINDOW_DTIME_PER_SECOND = 0.75
#: CPU seconds per op of setting up one window: building the full model in Python and CP-SAT's load before
#: its deterministic clock starts, counted for every window. Measured on windows CP-SAT closed at once
#: (under 0.01 units): median 3.8e-4, at most 9.1e-4 CPU s per op over 65 such windows under load
#: (``python benchmarks/limit_use.py --rates``, line "window set-up per op"); about 2.5e-4 on an
#: unloaded 1536-op makespan case. Policy: below the median, so the count does not run ahead of the CPU.
WINDOW_LOAD_S_PER_OP = 3e-4

#: Ops one window frees in all (spread over its devices: 2 or 4), before a pass without improvement
#: grows it by :data:`LNS_GROWTH`. Policy: small enough that CP-SAT searches a window to its end in a
#: fraction of :data:`LNS_WINDOW_S` on the tuning set's sizes, large enough to move a microbatch's F, B
#: and W past each other on two devices.
LNS_WINDOW_OPS = 48
#: Growth of the window after a pass of the cover without improvement (policy: 1.5 reaches the whole
#: device in a few passes without skipping the sizes between).
LNS_GROWTH = 1.5
#: Nominal idle seconds of search per window, as a share of ``min(limit, CANONICAL_LIMIT_S)`` (so the
#: same for every limit above it). Policy: 0.5 s at 10 s, a tenth of what the phases before leave on the
#: tuning set, so a limit runs at least several windows and the counted use ends within one of it.
LNS_WINDOW_SHARE = 0.05
#: Nominal idle seconds of the full-model search (with the best bound, so it can prove) after each pass of
#: windows that improved, on problems of at most ``SMALL_OPS`` ops where CP-SAT proves what it can
#: directly, as the same kind of share. Policy: 2 s at 10 s; a proof the canonical limit's search missed
#: on a tuning case took 3 s of a 60 s search.
LNS_PROOF_SHARE = 0.2


#: Idle seconds per op of one trial of the critical-chain order search
#: (:func:`pipesched.solver.heuristics.interleaved_local.local_search`: one order timed), as the final phase
#: above ``FULL_MODEL_OPS`` ops counts it (:mod:`pipesched.solver.portfolio.chain_fill`). Measured 1.0-1.9e-6
#: over the development set's rows above 4000 ops on an idle 2-core AMD EPYC, 1.0-1.5e-6 on the tuning set's
#: (``python benchmarks/limit_use.py --large`` prints each run's rate). Policy: at the top of that range, so
#: the count, not the wall clock, ends the search on an idle machine (the answer repeats).
CHAIN_TRIAL_S_PER_OP = 2e-6
#: The same for one tail re-chosen (:func:`~pipesched.solver.heuristics.interleaved_local.tail_variants`,
#: its timing included): 2.9-4.6e-5 per op on the same rows; policy, likewise at the top.
TAIL_VARIANT_S_PER_OP = 5e-5


def idle_seconds(budget: Budget) -> float:
    """What ``budget``'s phases used, in idle-machine seconds: its charges are per-op costs about doubled
    for a shared machine (:data:`~pipesched.solver.budget.SHARED_SLOWDOWN`), so they count at their idle
    equivalent; the uncharged phases recorded idle seconds already."""
    return budget.spent / SHARED_SLOWDOWN + budget.unplanned

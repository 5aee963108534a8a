"""What each phase of a solve costs per op, in wall seconds, as one record.

Why a record rather than loose constants: ``python benchmarks/phase_costs.py`` re-measures every
field under its own name and prints what is charged beside what was measured, and
``tests/solver/test_phase_costs_fields.py`` fails when a field has no measurement there. Each figure
is an idle-core measurement rounded up, about doubled for a shared machine
(:data:`pipesched.solver.budget.SHARED_SLOWDOWN`); where a phase runs several policies or trials, the
field is per op *and* policy (or trial), as its comment says.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PerOpCosts:
    """Wall seconds per op of each phase the budget charges (see the module docstring)."""

    #: One exact stage-span re-timing (Dinkelbach rounds of pure-Python Bellman-Ford): 0.72 s for a
    #: near-optimal 576-op zero-bubble order on an idle core, 1.25 ms per op. The earlier 0.5 ms let
    #: ``auto`` end 0.6-0.7 s past a 60 s limit on the paper cases.
    retime: float = 1.5e-3
    #: :func:`pipesched.solver.timing.retime.compact` (two simulator passes), the re-timing used above
    #: :data:`~pipesched.solver.budget.EXACT_TIMING_OPS` or for makespan: an upper estimate, not a fit.
    compact: float = 5e-5
    #: One local-search trial: re-timing the order once.
    trial: float = 1.6e-5
    #: Building the full CP-SAT model.
    build: float = 1e-4
    #: Building the single-device relaxations' models (the first and the last device).
    relax: float = 1.5e-4
    #: One list-scheduling search method run (greedy, the V greedy), its validation included.
    recipe: float = 3e-4
    #: One fixed recipe (build the order, simulate, validate): 0.056-0.13 s at 3072 ops and 0.9-1.2 s
    #: at 24.6k ops with the load average near 4, i.e. 2e-5 to 5e-5; rounded up for a busier machine.
    fixed_recipe: float = 6e-5
    #: What every answer costs however short its limit: one order of the zero-bubble grid, its timing
    #: and :func:`pipesched.solver.timing.finalize.finalize`. The first-schedule answer took 0.84 s of CPU
    #: at 24.6k ops and 4.4 s at 98k ops (34-45 us per op, ``python benchmarks/large_problems.py``,
    #: column "first schedule"); doubled. A problem whose set-up does not fit its limit gets that first
    #: schedule at once (:func:`pipesched.solver.budget.setup_cost`).
    setup: float = 9e-5
    #: :func:`~pipesched.solver.timing.finalize.finalize` on top of the policy margin
    #: :data:`~pipesched.solver.budget.FINISH_S_PER_OP`: finalize without its bound measured 17-19 us of
    #: CPU per op at 24.6k and 98k ops, so the two together (40 us) are about twice it.
    finalize: float = 1e-5
    #: The zero-bubble authors' 2p construction, ``zb_auto_candidates`` (16 constructions, screening, two
    #: compactions): 1.1-1.2e-4 at 2.3k-12k ops, load 4-6; rounded up.
    zb_auto: float = 1.5e-4
    #: The authors' ZB-V generator, ``zbv_candidates`` (8 chains of runs): 1.9-2.5e-4 at 4.6k-25k ops.
    zbv: float = 3e-4
    #: Its reduced set, which ``auto`` runs above :data:`~pipesched.solver.budget.FULL_MODEL_OPS`: the
    #: median-cost view with ``fill_f`` on, whose chains built the best order on every V tuning case
    #: above 4000 ops.
    zbv_large: float = 1e-4
    #: Per op and policy of the interleaved memory greedy's grid, its timing included: 1.1e-5 to 4.6e-5
    #: at 192-1536 ops with the load average at 4.7, rounded up.
    interleaved_memory: float = 6e-5
    #: Per op and trial of the interleaved order search (one order timed, the tails' re-choosing spread
    #: over them): 2.1e-6 to 8.3e-6 at 192-1536 ops, unbounded runs, load about 1; rounded up.
    interleaved_trial: float = 1e-5
    #: Per op and order of the V tight-cap orders (each list-scheduler policy, ZB-V's order and its
    #: deferred-W form, timing included): 1.5e-5 to 1.9e-5 at 192-3072 ops, 14.6B profile, caps 1p and
    #: 1.5p, load 2; rounded up. Their order search is charged per trial at :attr:`trial`.
    v_memory: float = 6e-5
    #: Per op and policy of the V tight-cap orders' wide grid as ``auto`` charges it: 7.6e-6 at 14.6B
    #: p8 m32 1.5p, rounded up by the margin of :attr:`v_memory` (whose 6e-5 would book about 3.7 s of a
    #: 10 s limit for what takes 0.5 s).
    v_wide: float = 2.5e-5


#: The figures the budget charges; ``python benchmarks/phase_costs.py`` re-measures each field.
PER_OP = PerOpCosts()

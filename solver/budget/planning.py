"""The planner's budget (:mod:`pipesched.solver.planning.planner`): how a plan's time limit is shared
among the candidate splits' solves, each constant measured (with the command that re-derives it) or
policy (with its reason), as in :mod:`pipesched.solver.budget`."""

from __future__ import annotations

# --- planning a model (:mod:`pipesched.solver.planning.planner`) -------------------------
# The search is sized in nominal seconds (each solve's ``time_limit_s``), never from the clock, so the
# same model and limit give the same plan; the wall clock is only a net (``Plan.wall_cut`` says it cut).

#: Share of the time limit planned for (solvers may overrun their own limit by a little) (policy).
PLAN_SAFETY = 0.85
#: Assumed wall seconds per nominal second of an ``auto`` solve: the nominal budget is the planned wall
#: time over this. Measured: auto ran 6.4 s on a 4.6 s limit (8B, p = 8, m = 32, memory-capped;
#: ``benchmarks/plan.py`` at load 2.5).
#: Re-measured by ``python benchmarks/plan.py``.
PLAN_OVERRUN = 1.3
#: Shortest nominal limit a candidate is solved with (policy).
PLAN_MIN_SHARE_S = 0.2
#: Nominal limit of each rule's solve, at most: ``auto`` sizes its phases by it (its exact phases need
#: about 1 s) and returns as soon as it proves optimality (policy).
PLAN_NOMINAL_S = 1.5
#: Most nominal seconds per local move: a move is one of many steps of the search, and breadth wins
#: over depth there (``benchmarks/plan.py``'s 8B, V = 128k, v = 2 tight case, each solve of ``plan()``
#: traced: moves of 0.7-3 s found its best splits; rules solved 5-16 s each were 0.7-1.4% above
#: their split bounds) (policy).
PLAN_MOVE_S = 3.0
#: Nominal seconds a solve that proved its split optimal is charged: ``auto`` returns at once then
#: (0.15-0.2 s of wall in the trace above), and charging its full limit would starve the moves (policy).
PLAN_PROVEN_S = 0.2
#: Local moves solved per round, least split bound first (policy).
PLAN_MAX_MOVES = 4
#: Most splits the bound-guided enumeration (:mod:`pipesched.solver.planning.survivors`) lists before it
#: lowers its target instead; and most stage ends it visits per split allowed (caps, not a clock: the
#: same model always gets the same splits; policy).
PLAN_SURVIVORS_MAX = 4000
PLAN_SURVIVORS_VISITS = 25
#: Surviving splits (least cheap bound first) whose relaxed Problem's analytic bound is computed to rank
#: them (about 10-50 ms each at 400-1500 ops) (policy).
PLAN_SURVIVORS_RANKED = 64
#: Nominal seconds the search is charged for that enumeration and ranking (0.1-2.4 s of wall on
#: ``benchmarks/plan.py``'s cases at load 3-8; policy).
PLAN_SURVIVORS_S = 1.0

# --- the plan bound's V-turn device windows ----------------------------------------------------

#: Most cells (``p (n + 1)⁴ / 4``, ``n`` expanded layers) the min-max DP of
#: :func:`pipesched.solver.planning.v_turn_window.v_turn_devices` may visit; above it the plan bound
#: keeps the paired device windows without the turn. 1.5M cells (8B-shaped, p = 4) take about 0.3 s;
#: a 70B-shaped p = 16 model (190M) would take minutes (policy).
V_TURN_MAX_CELLS = 5_000_000

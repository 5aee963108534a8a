"""A TUNING set and a DEVELOPMENT set of problems from stated distributions (docs/heldout.md).

A constant tuned on the cases it reports measures the tuning, not the solver. So every tuned constant
or policy grid is chosen on ``tuning()`` only. The second set was meant to be held out, but solver
changes were made after reading its results, so it is a development set: a check beside the tuning
set, not a blind one. The held-out set is ``benchmarks/heldout_cases.json`` (drawn once by
``benchmarks/heldout_draw.py`` from other models and other depths; ``benchmarks/heldout.py --set
heldout`` reports it).

Distributions (one draw per case, ``random.Random(seed)``):
- model: one of the zero-bubble paper's Table 6 profiles (F, B, W, comm in ms; h, a for memory),
  per-stage costs jittered uniformly by +-``JITTER`` (each stage draws its own factor per op kind);
- memory (paper formulas, sequence 1024): M_B = 34h + 5as, M_W = 32h; deltas F +M_B, B M_W - M_B,
  W -M_W; with v chunks per device each chunk carries 1/v of the costs and of M_B, M_W;
- cap: ``c * p * M_B`` with c uniform in [1, 2] (the paper's 1p .. 2p), one number for all devices;
- placement: loop with v in {1, 2, 4} or V (v = 2); objective stage_span or makespan (3:1).
The two sets are disjoint by construction: different seeds AND different (p, m) grids (the
tuning grid, deep part included, shares no (p, m) pair with the development grid).

Sizes: TUNING 30 cases: the first 24 over p in {4, 8, 16}, m in {2p, 3p, 4p} (seed ``TUNING_SEED``),
then 6 deep ones over p = 32, m in {2p, 3p, 4p} (seed ``TUNING_DEEP_SEED``), appended in issue 16 so
the set covers the depths the solver is used at (the zero-bubble paper's largest cases have p = 32);
the first 24 draws are unchanged. DEVELOPMENT 24 cases over p in {6, 12, 24}, m in {2p + 2, 5p // 2, 5p}.
The V and interleaved list-policy sets have tuning sets of their own, drawn the same way but from one
family each (``v_tuning()``: V, caps 1p to 2p; ``interleaved_tuning()``: loop v = 2 / 4, caps 1 to 1.25
times IZB's peak), 18 cases over p in {4, 8, 16}, m in {2p, 4p}, their own seeds: the general set has too
few cases of either family to choose a set on.
List them: ``python benchmarks/cases.py`` (``--set development``, ``--dump DIR`` writes problem JSON).
"""

from __future__ import annotations

import argparse
import dataclasses
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipesched.solver import Problem

SEQUENCE = 1024
JITTER = 0.02
TUNING_SEED = 20261125
TUNING_DEEP_SEED = 20261157  # the deep tuning cases' own stream, so the first 24 draws stay as they were
DEVELOPMENT_SEED = 91125
V_TUNING_SEED = 20261128  # the V policy sets' tuning cases (v_tuning())
INTERLEAVED_TUNING_SEED = 20261129  # the interleaved policy set's tuning cases (interleaved_tuning())
SET_SIZE = 24
DEEP_SIZE = 6  # as many as p = 16 has (two per m)


@dataclass(frozen=True)
class Profile:
    """One row of the zero-bubble paper's Table 6 (times of one stage, one microbatch)."""

    model: str
    h: int
    a: int
    f: float
    b: float
    w: float
    comm: float


PROFILES = (
    Profile("1.5B", 2304, 24, 18.522, 18.086, 9.337, 0.601),
    Profile("6.2B", 4096, 32, 29.718, 29.444, 19.927, 0.527),
    Profile("14.6B", 5120, 40, 11.347, 11.248, 8.132, 0.377),
    Profile("28.3B", 6144, 48, 10.419, 10.207, 7.715, 0.408),
)

TUNING_GRID = tuple((p, m) for p in (4, 8, 16) for m in (2 * p, 3 * p, 4 * p))
TUNING_DEEP_GRID = tuple((p, m) for p in (32,) for m in (2 * p, 3 * p, 4 * p))
DEVELOPMENT_GRID = tuple((p, m) for p in (6, 12, 24) for m in (2 * p + 2, 5 * p // 2, 5 * p))
PLACEMENTS = (("loop", 1), ("loop", 2), ("loop", 4), ("v", 2))
#: The V and interleaved policy sets' tuning grids: no (p, m) pair of DEVELOPMENT_GRID (p there is 6, 12, 24).
V_TUNING_GRID = tuple((p, m) for p in (4, 8, 16) for m in (2 * p, 4 * p))
INTERLEAVED_TUNING_GRID = tuple((p, m) for p in (4, 8, 16) for m in (2 * p, 4 * p))
FAMILY_SIZE = 18  # three cases per (p, m) pair of those grids


@dataclass(frozen=True)
class Case:
    """A drawn problem and what it was drawn from (so a table can name it)."""

    name: str
    profile: str
    cap_factor: float
    problem: Problem


def _problem(rng: random.Random, prof: Profile, p: int, m: int, placement: str, v: int,
             objective: str, cap_factor: float) -> Problem:
    stages = p * v

    def jittered(x: float) -> list[float]:
        return [round(x / v * rng.uniform(1 - JITTER, 1 + JITTER), 4) for _ in range(stages)]

    mb = (34 * prof.h + 5 * prof.a * SEQUENCE) / v
    mw = 32 * prof.h / v
    return Problem(
        devices=p, microbatches=m, stages_per_device=v, placement=placement, objective=objective,
        costs={"forward": jittered(prof.f), "backward_input": jittered(prof.b),
               "backward_weight": jittered(prof.w), "comm": prof.comm},
        memory={"forward": mb, "backward_input": mw - mb, "backward_weight": -mw,
                "limit": round(cap_factor * p * mb * v, 1)},
    )


def layout(rng: random.Random, placements: Sequence[tuple[str, int]] = PLACEMENTS,
           caps: tuple[float, float] = (1.0, 2.0)) -> tuple[str, int, str, float]:
    """Placement, v, objective (stage_span 3 in 4) and cap factor (uniform in ``caps``) of one case, drawn
    after its model (``benchmarks/heldout_draw.py`` draws the held-out set's the same way)."""
    placement, v = rng.choice(placements)
    objective = rng.choice(("stage_span", "stage_span", "stage_span", "makespan"))
    return placement, v, objective, round(rng.uniform(*caps), 2)


def draw(seed: int, grid: tuple[tuple[int, int], ...], size: int = SET_SIZE, models: Sequence[Any] = PROFILES,
         build: Callable[..., Problem] | None = None, placements: Sequence[tuple[str, int]] = PLACEMENTS,
         caps: tuple[float, float] = (1.0, 2.0)) -> list[Case]:
    """``size`` cases cycling over ``grid``; everything else drawn from ``seed``: a model (anything with
    a ``model`` name), its layout (among ``placements``, cap factor uniform in ``caps``), then the problem
    ``build`` makes of them (default: the paper's formulas)."""
    rng = random.Random(seed)
    build = build or _problem
    cases = []
    for i in range(size):
        p, m = grid[i % len(grid)]
        prof = rng.choice(models)
        placement, v, objective, cap = layout(rng, placements, caps)
        name = f"{prof.model} p{p} m{m} {placement}{v} {cap}p {objective}"
        cases.append(Case(name, prof.model, cap, build(rng, prof, p, m, placement, v, objective, cap)))
    return cases


def tuning() -> list[Case]:
    """The only cases a constant may be chosen on: the first 24 as drawn before issue 16's deep
    cases, then the ``DEEP_SIZE`` deep ones (p = 32)."""
    return draw(TUNING_SEED, TUNING_GRID) + draw(TUNING_DEEP_SEED, TUNING_DEEP_GRID, DEEP_SIZE)


def development() -> list[Case]:
    """The set once called held-out: no constant was chosen on it, but solver changes followed its
    results, so it is not blind (docs/heldout.md)."""
    return draw(DEVELOPMENT_SEED, DEVELOPMENT_GRID)


def v_tuning() -> list[Case]:
    """The cases the V policy sets (``zb-v-greedy``'s ``V``, ``v-memory``'s ``VM`` and ``VM_WIDE``'s run
    order) are chosen on: ``FAMILY_SIZE`` V (v = 2) cases over ``V_TUNING_GRID`` (p in {4, 8, 16},
    m in {2p, 4p}), cap factor uniform in [1, 2] (ZB-V's 1p to the paper's 2p), seed ``V_TUNING_SEED``."""
    return draw(V_TUNING_SEED, V_TUNING_GRID, FAMILY_SIZE, placements=(("v", 2),))


def _izb_capped(rng: random.Random, prof: Profile, p: int, m: int, placement: str, v: int, objective: str,
                cap_factor: float) -> Problem:
    """The paper's problem with its cap at ``cap_factor`` times the peak of IZB's order (torch's
    ScheduleInterleavedZeroBubble): the tight caps the interleaved memory greedy is for."""
    from pipesched.solver import Instance
    from pipesched.solver.core.metrics import peak_memory
    from pipesched.solver.heuristics.classic.interleaved_zb import interleaved_zb_order

    problem = _problem(rng, prof, p, m, placement, v, objective, cap_factor)
    inst = Instance.from_problem(problem)
    limit = round(cap_factor * max(peak_memory(inst, interleaved_zb_order(inst))), 1)
    return problem.model_copy(update={"memory": problem.memory.model_copy(update={"limit": limit})})


def interleaved_tuning() -> list[Case]:
    """The cases the interleaved memory greedy's set (``INTERLEAVED``) is chosen on: ``FAMILY_SIZE`` loop
    cases with v in {2, 4} over ``INTERLEAVED_TUNING_GRID`` (p in {4, 8, 16}, m in {2p, 4p}), seed
    ``INTERLEAVED_TUNING_SEED``, cap ``c`` times the peak of IZB's order with c uniform in [1, 1.25]
    (named ``{c}izb``): the caps the greedy is for (at 1p to 2p of M_B most interleaved caps are loose)."""
    cases = draw(INTERLEAVED_TUNING_SEED, INTERLEAVED_TUNING_GRID, FAMILY_SIZE, build=_izb_capped,
                 placements=(("loop", 2), ("loop", 4)), caps=(1.0, 1.25))
    return [dataclasses.replace(c, name=c.name.replace(f" {c.cap_factor}p ", f" {c.cap_factor}izb ")) for c in cases]


SETS: dict[str, Callable[[], list[Case]]] = {
    "tuning": tuning, "development": development, "v-tuning": v_tuning, "interleaved-tuning": interleaved_tuning}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=tuple(SETS), default="tuning")
    parser.add_argument("--dump", type=Path, help="write one problem JSON per case here")
    args = parser.parse_args(argv)
    cases = SETS[args.set]()
    for i, case in enumerate(cases):
        print(f"{i:2d} {case.name}")
        if args.dump:
            args.dump.mkdir(parents=True, exist_ok=True)
            (args.dump / f"{args.set}_{i:02d}.json").write_text(case.problem.model_dump_json(indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

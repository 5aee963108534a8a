"""Greedy vs every applicable recipe at the recipe's own memory peak, on seeded random problems.

For each random problem (p in 2..8, loop or V placement, v in 1..2, uneven per-stage costs, comm,
split or fused, either objective) and each recipe that applies, the recipe's peak activation
memory becomes ``memory.limit`` and the greedy method schedules the same problem under it. The
table counts how often greedy is better, equal or worse, and the objective ratio greedy / recipe.
Run: ``python benchmarks/greedy_vs_recipes.py [trials] [seed]`` (defaults 60, 3); writes
``benchmarks/results/greedy_vs_recipes.md``.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from pipesched.solver import Problem, get_method, solve

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import publish  # noqa: E402

RECIPES = ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zb-v", "dualpipe-v")


def random_problem(rng: random.Random) -> Problem:
    p = rng.choice([2, 3, 4, 6, 8])
    placement = rng.choice(["loop", "v"])
    v = 2 if placement == "v" else rng.choice([1, 1, 2])
    stages = p * v
    return Problem(
        devices=p,
        microbatches=rng.choice([p, 2 * p, 3 * p + 1, 4 * p]),
        stages_per_device=v,
        placement=placement,
        split_backward=rng.random() < 0.8,
        costs={
            "forward": [rng.choice([0.5, 1.0, 1.5]) for _ in range(stages)],
            "backward_input": [rng.choice([1.0, 1.5, 2.0]) for _ in range(stages)],
            "backward_weight": [rng.choice([0.5, 1.0]) for _ in range(stages)],
            "comm": rng.choice([0.0, 0.1, 0.5]),
        },
        objective=rng.choice(["makespan", "stage_span"]),
    )


def main() -> int:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    rng = random.Random(seed)
    stats: dict[str, list[float]] = {name: [] for name in RECIPES}
    for _ in range(trials):
        problem = random_problem(rng)
        for name in RECIPES:
            if get_method(name).applies(problem):
                continue
            recipe = solve(problem, name)
            capped = problem.model_dump()
            capped["memory"]["limit"] = max(recipe.peak_memory)
            greedy = solve(Problem.model_validate(capped), "greedy")
            stats[name].append(greedy.objective_value / recipe.objective_value)
    rows = []
    for name, ratios in stats.items():
        if not ratios:
            continue
        better = sum(r < 1 - 1e-9 for r in ratios)
        worse = sum(r > 1 + 1e-9 for r in ratios)
        rows.append(f"| {name} | {len(ratios)} | {better} | {len(ratios) - better - worse} | {worse} | "
                    f"{sum(ratios) / len(ratios):.3f} | {min(ratios):.3f} | {max(ratios):.3f} |")
    table = "\n".join([
        "| recipe | problems | greedy better | equal | greedy worse | mean ratio | best ratio | worst ratio |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
    ])
    text = (f"# Greedy vs recipes at the recipe's own memory peak\n\nMade by `python benchmarks/greedy_vs_recipes.py "
            f"{trials} {seed}`. Ratio = greedy objective / recipe objective (lower is better for greedy).\n\n"
            + table + "\n")
    publish(text, Path(__file__).parent / "results" / "greedy_vs_recipes.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())

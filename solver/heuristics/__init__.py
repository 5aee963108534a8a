"""Orders without a solver: the classic recipes, the greedy list scheduler, the zero-bubble grid, local search."""

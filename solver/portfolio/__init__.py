"""Method ``auto``: every heuristic, then bounds and CP-SAT, sized by :mod:`pipesched.solver.budget`."""

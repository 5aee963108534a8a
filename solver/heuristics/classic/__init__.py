"""The classic fixed recipes: GPipe, 1F1B, interleaved 1F1B, looped BFS, ZB-H1/H2, ZB-V, DualPipe-V and
DualPipe (one module each; registered by :data:`pipesched.solver.heuristics.catalog.HEURISTICS`)."""

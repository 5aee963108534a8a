"""The classic fixed recipes: GPipe, 1F1B, interleaved 1F1B, ZB-H1/H2, ZB-V, DualPipe-V (one module each)."""

# looped-bfs is not yet in the core registry's module list (issue 14 lands without core changes):
# loading any classic recipe imports this package, which registers it.
from . import looped_bfs as looped_bfs  # noqa: E402

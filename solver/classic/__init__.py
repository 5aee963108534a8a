"""The classic fixed recipes (GPipe, 1F1B, interleaved 1F1B, ZB-H1/H2, ZB-V) and the greedy list scheduler."""

from . import gpipe  # noqa: F401  (registers the method)

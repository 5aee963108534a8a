"""The classic fixed recipes (GPipe, 1F1B, interleaved 1F1B, ZB-H1/H2, ZB-V) and the greedy list scheduler."""

from . import gpipe, greedy, interleaved, one_f_one_b, zb_h, zb_v  # noqa: F401  (each module registers its methods)

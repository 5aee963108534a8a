"""The classic fixed recipes (GPipe, 1F1B, interleaved 1F1B, ZB-H1/H2, ZB-V, DualPipe-V) and the greedy list scheduler."""

from . import dualpipe_v, gpipe, greedy, interleaved, one_f_one_b, zb_h, zb_v  # noqa: F401  (each registers its methods)

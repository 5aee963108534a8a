"""The classic fixed recipes: GPipe, 1F1B, interleaved 1F1B, ZB-H1/H2, ZB-V, DualPipe-V (one module each)."""

"""What a contiguous range of expanded layers adds up to as one pipeline stage.

Planning looks at thousands of candidate stages, so a :class:`LayerTable` keeps prefix sums of every
per-layer figure and answers a range in O(1); :func:`stage_sums` is the exact (``math.fsum``, tidied)
version the induced :class:`~pipesched.solver.Problem` is built from.

Recomputation (activation checkpointing) of a stage applies to the layers that define ``recompute``
(all of them, or a number of them taken in :func:`recompute_order`: per-layer granularity):
their deltas become the recompute deltas, their B re-runs their F first (B costs
``backward_input + forward``), and while that B runs their full ``memory.forward`` is live again: the
stage's *transient* (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
Models", §4: full recomputation stores only each layer's input).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import accumulate

from .model import ExpandedLayer


def tidy(x: float) -> float:
    """``x`` to 12 significant digits: sums like 0.1 + 0.2 come out as 0.3, so the exact solvers'
    time scaling (the coarsest power of ten that makes every cost an integer) stays coarse."""
    return float(f"{x:.12g}") + 0.0


def tidy_sum(xs: Iterable[float]) -> float:
    """The exact sum of ``xs``, tidied; 0 where it is within rounding of 0 next to its terms: decimal
    deltas such as 0.1 + 0.2 - 0.3 sum exactly to -5.6e-17 in binary, a magnitude the Problem refuses."""
    terms = list(xs)
    total = math.fsum(terms)
    return 0.0 if abs(total) <= 1e-12 * max(map(abs, terms), default=0.0) else tidy(total)


@dataclass(frozen=True)
class StageSums:
    """One stage's per-microbatch costs, deltas (summing to 0), static memory and transient."""

    forward: float
    backward_input: float
    backward_weight: float
    d_forward: float
    d_backward_input: float
    d_backward_weight: float
    static: float
    transient: float  # extra memory live while this stage's B runs (recomputed activations)
    output: float  # size sent to the next stage: the last layer's output
    comm: float | None = None  # collective time inside F + B an overlapped pair can hide (None: no layer says)

    @property
    def work(self) -> float:
        return self.forward + self.backward_input + self.backward_weight

    @property
    def held(self) -> float:
        """The most one microbatch holds on this stage between its F and its W (transient aside)."""
        return max(0.0, self.d_forward, self.d_forward + self.d_backward_input)


def recompute_order(layers: list[ExpandedLayer], start: int, end: int) -> list[int]:
    """The recomputable layers of ``[start, end)`` in the order a partial recompute takes them: the
    most activation memory saved per forward time re-run first (free ones first), then model order."""
    def key(k: int) -> tuple[float, int]:
        x = layers[k]
        save = x.mem_forward - (x.recompute[0] if x.recompute is not None else 0.0)
        return (-math.inf if x.forward == 0 else -save / x.forward, k)

    return sorted((k for k in range(start, end) if layers[k].recompute is not None), key=key)


def stage_sums(layers: list[ExpandedLayer], start: int, end: int, recompute: bool,
               count: int | None = None) -> StageSums:
    """Sums over layers ``[start, end)``; with ``recompute`` the layers that define it are recomputed,
    all of them, or with ``count`` the first ``count`` of :func:`recompute_order` (per-layer choice)."""
    part = layers[start:end]
    chosen = set(recompute_order(layers, start, end)[:count]) if recompute and count is not None else None
    rc = [x.recompute is not None and recompute and (chosen is None or start + k in chosen)
          for k, x in enumerate(part)]
    f = tidy_sum(x.forward for x in part)
    b = tidy_sum(x.backward_input + (x.forward if r else 0.0) for x, r in zip(part, rc, strict=True))
    w = tidy_sum(x.backward_weight for x in part)
    deltas = [x.recompute if r and x.recompute else (x.mem_forward, x.mem_backward_input, x.mem_backward_weight)
              for x, r in zip(part, rc, strict=True)]
    df = tidy_sum(d[0] for d in deltas)
    db = tidy_sum(d[1] for d in deltas)
    dw = -(df + db)  # exactly zero-sum in the order Problem checks it
    static = tidy_sum(x.static for x in part)
    transient = tidy_sum(x.mem_forward for x, r in zip(part, rc, strict=True) if r)
    comm = None
    if any(x.comm is not None for x in part):  # a recomputed layer's B re-runs its F's collectives too
        comm = tidy(math.fsum(x.comm[0] * (2 if r else 1) + x.comm[1]
                              for x, r in zip(part, rc, strict=True) if x.comm is not None))
    return StageSums(f, b, w, df, db, dw, static, transient, part[-1].output if part else 0.0, comm)


class LayerTable:
    """Prefix sums over the expanded layers, for O(1) approximate range figures in the search loops."""

    def __init__(self, layers: list[ExpandedLayer]) -> None:
        self.layers = layers
        self.n = len(layers)

        def prefix(values: list[float]) -> list[float]:
            return [0.0, *accumulate(values)]

        def rc(x: ExpandedLayer, i: int, plain: float) -> float:
            return x.recompute[i] if x.recompute is not None else plain

        self._f = prefix([x.forward for x in layers])
        self._b = prefix([x.backward_input for x in layers])
        self._w = prefix([x.backward_weight for x in layers])
        self._static = prefix([x.static for x in layers])
        self._df = prefix([x.mem_forward for x in layers])
        self._db = prefix([x.mem_backward_input for x in layers])
        self._rc_extra = prefix([x.forward if x.recompute is not None else 0.0 for x in layers])
        self._rc_df = prefix([rc(x, 0, x.mem_forward) for x in layers])
        self._rc_db = prefix([rc(x, 1, x.mem_backward_input) for x in layers])
        self._transient = prefix([x.mem_forward if x.recompute is not None else 0.0 for x in layers])
        self._can_rc = prefix([1.0 if x.recompute is not None else 0.0 for x in layers])

    def forward_before(self, i: int) -> float:
        """Forward time of every layer before ``i``: the earliest any op of a stage starting at ``i`` can run."""
        return self._f[i]

    def forward(self, i: int, j: int) -> float:
        return self._f[j] - self._f[i]

    def backward_input(self, i: int, j: int) -> float:
        return self._b[j] - self._b[i]

    def backward_weight(self, i: int, j: int) -> float:
        return self._w[j] - self._w[i]

    def work(self, i: int, j: int, recompute: bool = False) -> float:
        base = self._f[j] - self._f[i] + self._b[j] - self._b[i] + self._w[j] - self._w[i]
        return base + (self._rc_extra[j] - self._rc_extra[i] if recompute else 0.0)

    def recompute_extra(self, i: int, j: int) -> float:
        return self._rc_extra[j] - self._rc_extra[i]

    def can_recompute(self, i: int, j: int) -> bool:
        return self._can_rc[j] - self._can_rc[i] > 0.5

    def static(self, i: int, j: int) -> float:
        return self._static[j] - self._static[i]

    def held(self, i: int, j: int, recompute: bool = False) -> float:
        """What one microbatch holds between its F and its B (the F delta)."""
        df = self._rc_df if recompute else self._df
        return max(0.0, df[j] - df[i])

    def backward_extra(self, i: int, j: int, recompute: bool = False) -> float:
        """What a B takes on top while it runs (its positive delta, e.g. the recomputed inputs W needs)."""
        db = self._rc_db if recompute else self._db
        return max(0.0, db[j] - db[i])

    def transient(self, i: int, j: int, recompute: bool) -> float:
        return self._transient[j] - self._transient[i] if recompute else 0.0

"""Activation recomputation for a stage: F keeps only its input, B re-runs F before the backward.

A plan (``pipesched plan``) may mark stages ``recompute``: their forward runs without building a
graph (nothing saved for backward, only the stage input is kept), and their B first runs the
forward again with the graph on, then the usual B (and W from what B leaves). The time cost is one
more forward inside B, which is what the plan's induced Problem charges (``B + F``); the memory
saved is every activation autograd would have held between F and B.

Gradient exactness: the re-run sees the same input, the same weights (nothing updates them inside
a step) and the same random stream (the CPU generator's state is saved at F and restored around
the re-run, as ``torch.utils.checkpoint`` does), so dropout masks and every output match bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

Forward = Callable[[torch.Tensor], torch.Tensor]


@dataclass
class Replay:
    """What a recomputed F keeps for its B: the random state it ran with (the input is kept by the
    executor anyway, since B needs it)."""

    rng: torch.Tensor


def forward_without_graph(forward: Forward, x: torch.Tensor) -> tuple[torch.Tensor, Replay]:
    """The stage's output computed under ``no_grad`` (nothing saved), and what the re-run needs."""
    rng = torch.get_rng_state()
    with torch.no_grad():
        y = forward(x)
    return y, Replay(rng)


def forward_again(forward: Forward, x: torch.Tensor, replay: Replay) -> torch.Tensor:
    """The same forward with the graph on, under the random state F ran with (the caller's random
    stream continues as if nothing happened)."""
    with torch.random.fork_rng(devices=[]):
        torch.set_rng_state(replay.rng)
        with torch.enable_grad():
            return forward(x)

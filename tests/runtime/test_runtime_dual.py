"""Dual placement (DualPipe) on gloo ranks: twin stage modules on ranks r and p−1−r, the first half
of the microbatches flowing 0 → p−1 and the rest p−1 → 0, and the twins' weight gradients summed
after the step, give the single-process full-batch gradients on every rank."""

from __future__ import annotations

import torch
from runtime_limits import GROUP_TIMEOUT_S

from pipesched.runtime.launch import run_ranks

TOLERANCE = 1e-5


def _twin_rank(rank: int, world: int) -> dict:
    """Two ranks holding model stages 0 (a Linear(3, 2)) and 1 (a Linear(1, 1)) under stage ids
    0, 3 (rank 0) and 2, 1 (rank 1); model stage 0 gets different gradients on each rank, on top of
    gradients already accumulated before the step."""
    from pipesched.runtime.twins import TwinSum

    torch.manual_seed(0)
    a, b = torch.nn.Linear(3, 2), torch.nn.Linear(1, 1, bias=False)
    a.weight.grad = torch.full_like(a.weight, 10.0)  # accumulated before: not exchanged
    twins = TwinSum({0: a, 3: b} if rank == 0 else {1: b, 2: a}, world, rank, None, 20)
    twins.start()
    a(torch.full((1, 3), float(rank + 1))).sum().backward()
    twins.finish()
    return {"weight": a.weight.grad.clone(), "bias": a.bias.grad.clone(), "b": b.weight.grad.clone()}


def test_twins_end_with_the_sum_of_their_step_gradients_on_top_of_what_each_had() -> None:
    a, b = (r.value for r in run_ranks(_twin_rank, 2, timeout_s=GROUP_TIMEOUT_S))
    # the step's weight gradients are inputs 1 and 2 per output row: summed 3, on top of 10
    assert torch.equal(a["weight"], torch.full((2, 3), 13.0)) and torch.equal(b["weight"], a["weight"])
    # the bias had no gradient before: the sum alone, 1 + 1
    assert torch.equal(a["bias"], torch.full((2,), 2.0)) and torch.equal(b["bias"], a["bias"])
    assert torch.equal(a["b"], torch.zeros(1, 1)) and torch.equal(b["b"], a["b"])  # unused: zeros on both

"""A small MLP cut into stages of uneven size, for checks, tests and benchmarks.

Stage sizes differ on purpose (real models are uneven: embedding first, head last): stage s
has ``1 + s % 3`` hidden layers. The same seed gives the same weights in every process, so a
single-process reference can be rebuilt anywhere.
"""

from __future__ import annotations

import torch
from torch import nn


def mlp_stages(num_stages: int, width: int = 16, in_dim: int = 8, out_dim: int = 4, seed: int = 0,
               dtype: torch.dtype = torch.float32) -> list[nn.Module]:
    """``num_stages`` modules; chained in order they form the whole model."""
    g = torch.Generator().manual_seed(seed)
    stages: list[nn.Module] = []
    for s in range(num_stages):
        layers: list[nn.Module] = []
        dim = in_dim if s == 0 else width
        for _ in range(1 + s % 3):
            lin = nn.Linear(dim, width, dtype=dtype)
            with torch.no_grad():
                lin.weight.copy_(torch.randn(lin.weight.shape, generator=g, dtype=dtype) / dim ** 0.5)
                lin.bias.copy_(torch.randn(lin.bias.shape, generator=g, dtype=dtype) * 0.1)
            layers += [lin, nn.Tanh()]
            dim = width
        if s == num_stages - 1:
            layers.append(nn.Linear(width, out_dim, dtype=dtype))
            with torch.no_grad():
                layers[-1].weight.copy_(torch.randn(layers[-1].weight.shape, generator=g, dtype=dtype) / width ** 0.5)
                layers[-1].bias.zero_()
        stages.append(nn.Sequential(*layers))
    return stages


def sample_batch(batch: int, in_dim: int = 8, out_dim: int = 4, seed: int = 1,
                 dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, in_dim, generator=g, dtype=dtype), torch.randn(batch, out_dim, generator=g, dtype=dtype)


def reference_grads(stages: list[nn.Module], x: torch.Tensor, y: torch.Tensor,
                    loss_fn=nn.functional.mse_loss) -> dict[str, torch.Tensor]:
    """Full-batch gradients of the chained model, keyed ``"{stage}.{param name}"``."""
    model = nn.Sequential(*stages)
    model.zero_grad()
    loss_fn(model(x), y).backward()
    return {f"{s}.{n}": p.grad.clone() for s, m in enumerate(stages) for n, p in m.named_parameters()}

"""B then W gives exactly the fused backward's gradients, and W does not redo B's work."""

from __future__ import annotations

import torch
from torch import nn

from pipesched.runtime.replay.split_backward import backward_full, backward_input


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 12), nn.Tanh(), nn.Linear(12, 3))


def _reference(model: nn.Module, x: torch.Tensor, gy: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
    model.zero_grad()
    xi = x.clone().requires_grad_()
    model(xi).backward(gy)
    return [p.grad.clone() for p in model.parameters()], xi.grad


def test_b_then_w_equals_the_fused_backward_and_b_alone_touches_no_weight() -> None:
    model, x, gy = _mlp(), torch.randn(5, 6), torch.randn(5, 3)
    ref, ref_dx = _reference(model, x, gy)
    model.zero_grad()
    xi = x.clone().requires_grad_()
    (dx,), job = backward_input([model(xi)], [gy], [xi], list(model.parameters()))
    assert torch.equal(dx, ref_dx)
    assert all(p.grad is None for p in model.parameters())
    job.run()
    for a, p in zip(ref, model.parameters(), strict=True):
        torch.testing.assert_close(p.grad, a, rtol=0, atol=1e-7)


def test_w_replays_only_weight_nodes_not_the_input_path() -> None:
    model, x, gy = _mlp(), torch.randn(5, 6), torch.randn(5, 3)
    xi = x.clone().requires_grad_()
    y = model(xi)
    relu_node = y.grad_fn.next_functions[1][0].next_functions[0][0].next_functions[1][0]  # Addmm <- Tanh <- Addmm <- Relu
    assert "Relu" in type(relu_node).__name__ or "Threshold" in type(relu_node).__name__
    calls: list[str] = []
    relu_node.register_prehook(lambda g: calls.append("run"))
    _, job = backward_input([y], [gy], [xi], list(model.parameters()))
    assert calls == ["run"]  # B ran the activation chain once
    job.run()
    assert calls == ["run"]  # W did not run it again


def test_first_stage_without_input_gradient_does_the_whole_backward_at_w() -> None:
    model, x, gy = _mlp(), torch.randn(5, 6), torch.randn(5, 3)
    ref, _ = _reference(model, x, gy)
    model.zero_grad()
    (dx,), job = backward_input([model(x)], [gy], [x], list(model.parameters()))
    assert dx is None and all(p.grad is None for p in model.parameters())
    job.run()
    for a, p in zip(ref, model.parameters(), strict=True):
        torch.testing.assert_close(p.grad, a, rtol=0, atol=1e-6)


def test_a_weight_used_twice_is_counted_once_per_use() -> None:
    torch.manual_seed(1)
    lin = nn.Linear(4, 4)
    x = torch.randn(3, 4)
    xi = x.clone().requires_grad_()
    lin(torch.relu(lin(xi))).sum().backward()
    ref, ref_dx = lin.weight.grad.clone(), xi.grad.clone()
    lin.zero_grad()
    xi = x.clone().requires_grad_()
    y = lin(torch.relu(lin(xi)))
    (dx,), job = backward_input([y], [torch.ones_like(y)], [xi], list(lin.parameters()))
    job.run()
    torch.testing.assert_close(lin.weight.grad, ref, rtol=0, atol=1e-6)
    torch.testing.assert_close(dx, ref_dx, rtol=0, atol=1e-6)


def test_fused_backward_returns_the_input_gradient_and_fills_weights() -> None:
    model, x, gy = _mlp(), torch.randn(5, 6), torch.randn(5, 3)
    ref, ref_dx = _reference(model, x, gy)
    model.zero_grad()
    xi = x.clone().requires_grad_()
    (dx,) = backward_full([model(xi)], [gy], [xi])
    torch.testing.assert_close(dx, ref_dx, rtol=0, atol=0)
    for a, p in zip(ref, model.parameters(), strict=True):
        torch.testing.assert_close(p.grad, a, rtol=0, atol=0)

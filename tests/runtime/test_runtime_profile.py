"""profile() measures real modules and returns a Problem the solver accepts (the closed loop)."""

from __future__ import annotations

import pytest
import torch

import pipesched.runtime as rt
from pipesched.runtime.model import mlp_stages, sample_batch
from pipesched.solver import solve


def test_profile_returns_a_per_stage_problem_the_solver_schedules() -> None:
    stages = mlp_stages(4, width=32)
    x, y = sample_batch(6)
    problem = rt.profile(stages, x, loss_fn=torch.nn.functional.mse_loss, sample_target=y,
                         microbatches=4, stages_per_device=2, repeats=2, warmup=1)
    assert (problem.devices, problem.stages_per_device, problem.num_stages) == (2, 2, 4)
    for field in ("forward", "backward_input", "backward_weight"):
        assert len(getattr(problem.costs, field)) == 4
    assert all(t > 0 for t in problem.costs.forward)
    # a deeper stage (3 layers) saves more activations than a 1-layer one
    assert problem.memory.forward[2] > problem.memory.forward[0] > 0
    for s in range(4):
        assert problem.memory.forward[s] + problem.memory.backward_input[s] + problem.memory.backward_weight[s] == 0
    assert solve(problem, "interleaved-1f1b").ops


def test_profile_rejects_stages_that_do_not_divide_into_devices() -> None:
    with pytest.raises(ValueError, match="stages_per_device = 2"):
        rt.profile(mlp_stages(3), sample_batch(2)[0], stages_per_device=2)

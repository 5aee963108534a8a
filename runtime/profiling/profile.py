"""Measure real per-stage costs and activation memory, and return a ready :class:`Problem`.

The closed loop: profile the stage modules on the real device -> solve -> replay. Each stage is
timed exactly as the executor runs it: F = forward (+ loss on the last stage), B =
:func:`split_backward.backward_input`, W = :meth:`WeightGrad.run` (on the first stage B is empty
and W is the whole backward, as in the executor and in torch's runtime). Times are the median of
``repeats`` runs after ``warmup`` runs, in milliseconds.

Activation memory (MiB): on CUDA, ``torch.cuda.memory_allocated`` before and after each op; on
CPU, the bytes of the distinct tensors autograd saves during the forward (``saved_tensors_hooks``)
plus the stage output, all released at W (B keeps the graph pieces W needs). The deltas of a
stage are made to sum to exactly 0, as the problem requires.
"""

from __future__ import annotations

import statistics
import sys
import time
import types
from collections.abc import Callable, Sequence
from typing import Literal

import torch
from torch import nn

from pipesched.solver.core.problem import Costs, Memory, Problem

from ..host_memory import keep_freed_host_memory
from ..replay.split_backward import backward_input

MIB = 2.0**20


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _saved_bytes(fn: Callable[[], torch.Tensor]) -> tuple[torch.Tensor, int]:
    """Run ``fn`` and count the bytes of the distinct storages autograd saves for backward."""
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return out, sum(seen.values())


def _stage_profile(module: nn.Module, x: torch.Tensor, loss: Callable[[torch.Tensor], torch.Tensor] | None,
                   first: bool, repeats: int, warmup: int) -> tuple[list[float], list[float], torch.Tensor]:
    """(F, B, W) median ms, (F, B, W) memory deltas in MiB, and the stage output for the next stage."""
    device = x.device
    params = [p for p in module.parameters() if p.requires_grad]
    times: list[tuple[float, float, float]] = []
    mem = [0.0, 0.0, 0.0]
    out = x
    for k in range(warmup + repeats):
        xi = x.detach().requires_grad_(not first and x.is_floating_point())  # as the executor feeds stages
        module.zero_grad(set_to_none=True)
        _sync(device)
        before = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
        t0 = time.perf_counter()
        out, saved = _saved_bytes(lambda xi=xi: module(xi))
        y = loss(out) if loss is not None else out
        _sync(device)
        t1 = time.perf_counter()
        after_f = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
        g = None if loss is not None else torch.ones_like(out)
        _, job = backward_input([y], [g], [xi], params)
        _sync(device)
        t2 = time.perf_counter()
        after_b = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
        job.run()
        _sync(device)
        t3 = time.perf_counter()
        if k >= warmup:
            times.append((t1 - t0, t2 - t1, t3 - t2))
            if device.type == "cuda":
                mem = [(after_f - before) / MIB, (after_b - after_f) / MIB, 0.0]
            else:
                mem = [(saved + out.untyped_storage().nbytes()) / MIB, 0.0, 0.0]
        del y, job
    mem[2] = -(mem[0] + mem[1])  # whatever F and B hold is gone after W: deltas sum to 0
    ms = [1e3 * statistics.median(t[i] for t in times) for i in range(3)]
    module.zero_grad(set_to_none=True)
    return ms, mem, out.detach()


def profile(
    stage_modules: Sequence[nn.Module],
    sample_microbatch: torch.Tensor,
    *,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    sample_target: torch.Tensor | None = None,
    microbatches: int = 8,
    stages_per_device: int = 1,
    placement: Literal["loop", "v"] = "loop",
    split_backward: bool = True,
    comm_ms: float = 0.0,
    memory_limit_mib: float | list[float] | None = None,
    repeats: int = 5,
    warmup: int = 2,
    objective: Literal["makespan", "stage_span"] = "makespan",
) -> Problem:
    """A :class:`Problem` whose per-stage costs (ms) and memory (MiB) were measured on these modules.

    ``stage_modules`` are the S stages in model order (on the device to profile);
    ``sample_microbatch`` is one microbatch of model input. The last stage is timed with
    ``loss_fn(output, sample_target)`` (default: the output's mean). ``comm_ms`` is the
    point-to-point latency to assume between devices (measure it with your interconnect).
    """
    if not stage_modules:
        raise ValueError("stage_modules is empty: give the model's stages in order")
    if len(stage_modules) % stages_per_device:
        raise ValueError(f"{len(stage_modules)} stages cannot be split into stages_per_device = "
                         f"{stages_per_device} per device")
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats must be >= 1 and warmup >= 0 (got {repeats}, {warmup})")
    last = len(stage_modules) - 1
    keep_freed_host_memory()  # time ops as a replay runs them (host_memory.py)

    def loss(out: torch.Tensor) -> torch.Tensor:
        if loss_fn is None:
            return out.float().mean()
        if sample_target is None:
            raise ValueError("loss_fn needs sample_target (one microbatch of targets)")
        return loss_fn(out, sample_target)

    f, b, w, df, db, dw = ([] for _ in range(6))
    x = sample_microbatch
    for s, module in enumerate(stage_modules):
        ms, mem, x = _stage_profile(module, x, loss if s == last else None, s == 0, repeats, warmup)
        for lst, val in zip((f, b, w, df, db, dw), (*ms, *mem), strict=True):
            lst.append(round(val, 6))
    return Problem(
        devices=len(stage_modules) // stages_per_device,
        microbatches=microbatches,
        stages_per_device=stages_per_device,
        placement=placement,
        split_backward=split_backward,
        costs=Costs(forward=f, backward_input=b, backward_weight=w, comm=comm_ms),
        memory=Memory(forward=df, backward_input=db, backward_weight=[-(a + c) for a, c in zip(df, db, strict=True)],
                      limit=memory_limit_mib),
        objective=objective,
    )


class _CallableModule(types.ModuleType):
    """Lets ``pipesched.runtime.profiling.profile(...)`` call the function even once this module is imported."""

    def __call__(self, *args, **kwargs) -> Problem:
        return profile(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

"""Interleaved schedules in rounds of ``m // p`` microbatches, as torch 2.13 builds them: loop
placement, ``v >= 2`` chunks per device.

Two recipes, the per-device orders of torch's ``ScheduleInterleavedZeroBubble`` and
``ScheduleInterleaved1F1B`` (issue 12: where those orders beat every recipe of ours, ``auto`` must
reach them without torch):

- ``interleaved-zb`` (ZB-1P on ``v`` chunks; Qi et al., ICLR'24, "Zero Bubble Pipeline
  Parallelism", arXiv:2401.10241): interleaved 1F1B's phases with two zero-bubble changes: the
  warm-up is one forward per hop instead of two, and after the first ``d`` steady steps device ``d``
  runs one deferred W after every B, filling the bubble. With a fused backward there is no W to
  defer and torch's input-gradient backward is our B;
- ``interleaved-rounds``: interleaved 1F1B (two warm-up forwards per hop, W right after its B) in
  torch's rounds, which differ from ``interleaved-1f1b``'s groups of ``p`` when ``p`` does not divide ``m``.

Microbatches go in ``r = max(1, m // p)`` rounds of ``q = m / r``; step ``k`` of device ``d``
works on chunk ``(k // q) mod v`` (forwards) and chunk ``v - 1 - ((k - warmup) // q) mod v``
(backwards), each chunk's microbatches in order. With ``warmup = min((v - 1) q + p - 1 - d, v m)``:

1. warm-up: ``warmup`` forwards;
2. steady: ``v m - warmup`` steps of one F and one B, then one W (the oldest pending) once ``d``
   steps have passed;
3. cool-down: ``warmup`` steps of one B, then one W under the same rule;
4. drain: the Ws still pending.

``interleaved-rounds`` has ``warmup = min((v - 1) q + 2 (p - 1 - d), v m)`` and runs each W right
after its B.

torch requires ``m`` to be a multiple of ``r``; other ``m`` are built for ``m`` rounded up to a
multiple of ``p`` and trimmed (:func:`keep_microbatches`, which keeps the order deadlock-free).
"""

from __future__ import annotations

from collections import defaultdict, deque

from ...core.instance import Instance, OpId
from ...core.problem import Problem
from ...core.schedule import Order
from ._common import keep_microbatches, recipe


def _needs_loop(name: str, problem: Problem) -> str | None:
    if problem.placement != "loop" or problem.stages_per_device < 2:
        return (
            f"{name} needs placement 'loop' with stages_per_device >= 2 "
            f"(got {problem.placement!r}, {problem.stages_per_device}); use 1f1b or zb-h1 for v = 1"
        )
    return None


def _device_order(p: int, v: int, m: int, d: int, zero_bubble: bool, split: bool) -> list[OpId]:
    rounds = max(1, m // p)
    q = m // rounds  # microbatches per round
    warmup = min((v - 1) * q + (1 if zero_bubble else 2) * (p - 1 - d), v * m)
    steps = v * m

    def f_stage(k: int) -> int:
        return (k // q) % v * p + d

    def b_stage(k: int) -> int:
        return (v - 1 - ((k - warmup) // q) % v) * p + d

    nxt: dict[tuple[str, int], int] = defaultdict(int)  # next microbatch per (kind, stage)
    pending: deque[int] = deque()  # stages of Bs whose W is still to run, oldest first
    ops: list[OpId] = []

    def run(kind: str, stage: int) -> None:
        ops.append(OpId(kind, stage, nxt[kind, stage]))
        nxt[kind, stage] += 1

    def backward(k: int) -> None:  # one B, then its W (1F1B) or the oldest pending W after d steady steps (ZB)
        run("B", b_stage(k))
        if split:
            pending.append(b_stage(k))
        if pending and (not zero_bubble or k - warmup >= d):
            run("W", pending.popleft())

    # 1. warm-up: forwards only
    for k in range(warmup):
        run("F", f_stage(k))
    # 2. steady: 1F1B(+W)
    for k in range(warmup, steps):
        run("F", f_stage(k))
        backward(k)
    # 3. cool-down: B(+W)
    for k in range(steps, steps + warmup):
        backward(k)
    # 4. drain: the deferred Ws
    while pending:
        run("W", pending.popleft())
    return ops


def rounds_order(inst: Instance, zero_bubble: bool) -> Order:
    p, v, m = inst.devices, inst.stages_per_device, inst.microbatches
    built = m if m % max(1, m // p) == 0 else -(-m // p) * p
    order = [_device_order(p, v, built, d, zero_bubble, inst.split_backward) for d in range(p)]
    return keep_microbatches(order, m)


def interleaved_zb_order(inst: Instance) -> Order:
    return rounds_order(inst, zero_bubble=True)


def interleaved_rounds_order(inst: Instance) -> Order:
    return rounds_order(inst, zero_bubble=False)


INTERLEAVED_ZB = recipe(
    "interleaved-zb",
    "Interleaved zero bubble (torch's ScheduleInterleavedZeroBubble order): interleaved 1F1B with a "
    "shorter warm-up and deferred Ws; needs placement 'loop' with stages_per_device >= 2.",
    interleaved_zb_order,
    lambda problem: _needs_loop("interleaved-zb", problem),
)

INTERLEAVED_ROUNDS = recipe(
    "interleaved-rounds",
    "Interleaved 1F1B in torch's rounds of m // p microbatches (torch's ScheduleInterleaved1F1B order); "
    "needs placement 'loop' with stages_per_device >= 2.",
    interleaved_rounds_order,
    lambda problem: _needs_loop("interleaved-rounds", problem),
)

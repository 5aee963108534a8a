"""What DualPipe and DualPipe-V share: a device's op list written step by step, and the cool-down.

Both recipes write each device's order as DualPipe's reference ``step()`` does, chunk by chunk: a
forward, a backward whose W follows at once or waits in a queue, an F&B pair (:meth:`Steps.overlapped`).
Their steps 5 to 8 (the cool-down) are the same; only the counts and the device's index differ, so
they are written once (:func:`cool_down`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from ...budget import PER_OP
from ...core.instance import Instance, OpId
from ...core.method import Method, SolveOptions
from ...core.problem import Problem
from ...core.schedule import Order, Schedule
from ...timing.finalize import from_order
from ...timing.overlap import from_paired_order, pair_map

Plan = tuple[Order, list[tuple[OpId, OpId]]]


class Steps:
    """One device's op list; per chunk its stage id and the microbatch its local index 0 stands for."""

    def __init__(self, stage: tuple[int, int], offset: tuple[int, int], split: bool) -> None:
        self.stage, self.offset, self.split = stage, offset, split
        self.next = {"F": [0, 0], "B": [0, 0]}
        self.queue: deque[OpId] = deque()
        self.ops: list[OpId] = []
        self.pairs: list[tuple[OpId, OpId]] = []

    def _op(self, kind: str, chunk: int, local: int) -> OpId:
        return OpId(kind, self.stage[chunk], self.offset[chunk] + local)  # type: ignore[arg-type]

    def forward(self, chunk: int) -> None:
        self.ops.append(self._op("F", chunk, self.next["F"][chunk]))
        self.next["F"][chunk] += 1

    def backward(self, chunk: int, *, defer_w: bool = False) -> None:
        """B of the chunk's next microbatch; its W follows at once, or waits in the queue."""
        local = self.next["B"][chunk]
        self.next["B"][chunk] += 1
        self.ops.append(self._op("B", chunk, local))
        if self.split:
            w = self._op("W", chunk, local)
            if defer_w:
                self.queue.append(w)
            else:
                self.ops.append(w)

    def weight(self) -> None:
        if self.queue:
            self.ops.append(self.queue.popleft())

    def overlapped(self, f_chunk: int, b_chunk: int) -> None:
        """F of ``f_chunk`` and B of ``b_chunk`` as one overlapped pair (a full backward: its W follows)."""
        self.forward(f_chunk)
        f = self.ops[-1]
        self.backward(b_chunk)
        self.pairs.append((f, self.ops[-2] if self.split else self.ops[-1]))


def warm_up(dev: Steps, n: int, index: int) -> None:
    """Steps 1 to 3 on a device: ``2n`` times F0; ``index + 1`` times F0 then F1; ``n`` times B1 then F1
    (the zero-bubble split: each B1 is followed by its W1)."""
    for _ in range(2 * n):  # step 1: nF0
        dev.forward(0)
    for _ in range(index + 1):  # step 2: nF0F1
        dev.forward(0)
        dev.forward(1)
    for _ in range(n):  # step 3: nB1W1F1
        dev.backward(1)
        dev.forward(1)


def cool_down(dev: Steps, n: int, index: int) -> None:
    """Steps 5 to 8 on a device: ``n`` times B1 then F1 & B0; ``index + 1`` times B1, B0 with the Ws
    deferred from the middle on (one B earlier on odd ``index``); ``n`` times a queued W and a B0 whose
    W is queued; then the queued Ws."""
    for _ in range(n):  # step 5: nB1F1B0
        dev.backward(1)
        dev.overlapped(1, 0)
    mid = (index + 1) // 2
    for i in range(index + 1):  # step 6: nB1B0
        dev.backward(1, defer_w=i > mid or (i == mid and index % 2 == 1))
        dev.backward(0, defer_w=i >= mid)
    for _ in range(n):  # step 7: nWB0
        dev.weight()
        dev.backward(0, defer_w=True)
    while dev.queue:  # step 8: nW
        dev.weight()


def solve_paired(problem: Problem, name: str, plan: Callable[[Instance], Plan]) -> Schedule:
    """The recipe's order; with ``costs.overlap_fb`` its F&B pairs run as one overlapped op each."""
    inst = Instance.from_problem(problem)
    order, pairs = plan(inst)
    if inst.overlap is None:
        return from_order(problem, name, order, inst=inst)
    return from_paired_order(problem, name, order, pair_map(pairs), inst=inst)


def paired_method(name: str, description: str, plan: Callable[[Instance], Plan],
                  requires: Callable[[Problem], str | None]) -> Method:
    """The method record of a recipe with F&B pairs: its ``plan`` run by :func:`solve_paired`."""

    def solve(problem: Problem, options: SolveOptions) -> Schedule:
        return solve_paired(problem, name, plan)

    return Method(name, description, "recipe", solve, requires=requires, cost_per_op=PER_OP.fixed_recipe)

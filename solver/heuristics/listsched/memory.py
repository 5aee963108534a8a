"""Memory admission of the list schedulers: the banker's test.

An op of microbatch ``j`` on device ``k`` may only take memory that leaves every older in-flight
microbatch ``t < j`` able to finish alone, i.e. for each such ``t``: ``held_k(u >= t) + need_k(t) <=
limit_k``, where ``need_k(t)`` is the sum of the positive deltas ``t`` still has to apply on ``k``.
Microbatches enter the pipeline in index order, so the oldest unfinished one can always move and a
list never stalls on memory, provided one microbatch alone fits (``need_k <= limit_k``; otherwise
:class:`NotApplicableError` says where).
"""

from __future__ import annotations

from ...core.errors import NotApplicableError
from ...core.instance import Instance
from ...core.tolerance import cap_with_slack, within_cap


class BankersMemory:
    """Per-device banker's bookkeeping for a finite ``memory.limit`` (module docstring): every list
    policy that admits microbatches by the banker's test keeps one."""

    def __init__(self, inst: Instance) -> None:
        self.limit = inst.limit
        self.live = [0.0] * inst.devices
        self.inst = inst
        # per device and copy (one copy unless dual: a microbatch visits only its copy's stage there)
        self.per_copy = [
            [sum(max(0.0, inst.delta[k][s]) for k in inst.kinds for s in stages if inst.copy_range(s)[0] == lo)
             for lo in sorted({inst.copy_range(s)[0] for s in range(inst.num_stages)})]
            for stages in inst.stages_of_device
        ]
        self.positive = [max(x) for x in self.per_copy]
        self.ops_per_copy = [
            [len(inst.kinds) * sum(1 for s in stages if inst.copy_range(s)[0] == lo)
             for lo in sorted({inst.copy_range(s)[0] for s in range(inst.num_stages)})]
            for stages in inst.stages_of_device
        ]
        self.inflight: list[list[int]] = [[] for _ in range(inst.devices)]
        self.held: list[dict[int, float]] = [{} for _ in range(inst.devices)]
        self.need: list[dict[int, float]] = [{} for _ in range(inst.devices)]
        self.left: list[dict[int, int]] = [{} for _ in range(inst.devices)]
        self.held_above_zero = [0.0] * inst.devices  # sum of max(0, held): bounds every banker's term
        for d, (need, cap) in enumerate(zip(self.positive, self.limit, strict=True)):
            if not within_cap(need, cap):
                raise NotApplicableError(
                    f"one microbatch alone needs {need:g} activation memory on device {d} (the sum of the "
                    f"positive memory deltas of its stages there), above memory.limit {cap:g}: greedy cannot "
                    "guarantee progress; raise the limit or try cpsat"
                )

    def admit(self, j: int) -> None:
        """``j`` enters the pipeline: younger than every microbatch in flight (ages are admission order)."""
        c = 1 if self.inst.dual and j >= self.inst.split else 0
        for d in range(len(self.live)):
            if self.ops_per_copy[d][c] == 0:
                continue
            self.inflight[d].append(j)
            self.held[d][j] = 0.0
            self.need[d][j] = self.per_copy[d][c]
            self.left[d][j] = self.ops_per_copy[d][c]

    def allows(self, d: int, j: int, delta: float) -> bool:
        if delta <= 0:
            return True
        cap = cap_with_slack(self.limit[d])
        if self.live[d] + delta > cap:
            return False
        if self.held_above_zero[d] + self.positive[d] + delta <= cap:
            return True  # every term held_k(u >= t) + need_k(t) is at most this
        held, need, live = self.held[d], self.need[d], self.live[d]
        older = 0.0  # held by in-flight microbatches older than t
        for t in self.inflight[d]:  # admission order: oldest first
            if t == j:
                break
            if live - older + need[t] + delta > cap:
                return False
            older += held[t]
        return True

    def leaves_headroom(self, d: int, j: int, delta: float) -> bool:
        """Whether ``j``'s first op on ``d`` leaves room for the largest pending need of an older
        microbatch there (with v >= 2, the next chunk's forward of a microbatch already under way)."""
        if j in self.held[d] and (self.held[d][j] != 0.0 or self.need[d][j] not in self.per_copy[d]):
            return True  # not new to this device
        room = 0.0
        for t in self.inflight[d]:
            if t == j:
                break
            room = max(room, self.need[d][t])
        return within_cap(self.live[d] + delta + room, self.limit[d])

    def apply(self, d: int, j: int, delta: float) -> None:
        self.live[d] += delta
        before = self.held[d][j]
        self.held[d][j] = before + delta
        self.held_above_zero[d] += max(0.0, before + delta) - max(0.0, before)
        if delta > 0:
            self.need[d][j] -= delta
        self.left[d][j] -= 1
        if self.left[d][j] == 0:
            self.inflight[d].remove(j)
            del self.held[d][j], self.need[d][j], self.left[d][j]

"""Replay a pipesched schedule on torch.distributed: this rank's ops, in the schedule's order.

One training step (:meth:`PipelineExecutor.step`) splits the batch into the schedule's m
microbatches and walks this rank's plan (:mod:`pipesched.runtime.replay.plan`):

- ``F(s, i)``: forward of stage s; the output goes to stage s+1 (a send, or a local hand-off
  when s+1 is on this rank, as at the turn of a V). On the last stage the loss is computed here.
- ``B(s, i)``: with split backward, input gradient only (:func:`split_backward.backward_input`),
  sent upstream; the weight part is kept for W. Without W in the schedule, the fused backward.
- ``W(s, i)``: the weight gradient from what B left (no repeated work).

Loss scaling: with ``loss_reduction="mean"`` (a loss averaged over its batch, e.g. MSE, cross
entropy) microbatch i's loss is multiplied by ``n_i / N`` (its share of the batch; ``1/m`` for
equal microbatches), so the accumulated gradients equal one full-batch step:
``d/dθ mean_N = Σ_i (n_i/N) d/dθ mean_{n_i}``. With ``"sum"`` nothing is scaled. The returned
loss is the full-batch loss on the rank holding the last stage (``None`` elsewhere).

Memory: a microbatch's stage input and output are dropped after its B; the graph pieces W
needs are dropped after its W (fused B: everything after B). Stages in ``recompute`` (a plan's
activation checkpointing, :mod:`pipesched.runtime.replay.recompute`) keep only their input between F and
B: F runs without a graph and B runs it again first.

A microbatch's chain of stages is read from the schedule's instance (:func:`plan.prev_stage`,
:func:`plan.next_stage`), so loop, V and dual placements run the same code; the ranks holding a
chain's first stage need the inputs, those holding a last stage the targets. Under a dual
placement (docs/dualpipe.md: twin stage modules with the same initial parameters on ranks r and
p−1−r) the twins' weight gradients of the step are summed after its last op
(:mod:`pipesched.runtime.replay.twins`), and the returned loss is that of the microbatches whose chain
ends on this rank.

Data parallelism (``data_parallel``: the group of ranks that hold the same stages in replicas of the
pipeline): each stage's gradient all-reduce starts once its last W (B when fused) has run on this rank
and the step waits for all of them after its last op, then runs ``optimizer.step()`` when one is given
(:mod:`pipesched.runtime.replay.grad_sync`); this is the step's tail that ``costs.grad_sync`` and
``costs.optimizer`` model.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import torch
import torch.distributed as dist
from torch import nn

from pipesched.solver.core.instance import Instance, OpId
from pipesched.solver.core.schedule import Schedule
from pipesched.solver.formats.torch_csv import rank_programs
from pipesched.solver.timing.simulate import DeadlockError, simulate
from pipesched.solver.timing.validate import validate

from ..errors import PipelineError, ScheduleMismatchError
from ..host_memory import keep_freed_host_memory
from .comm import Pending, Transport
from .grad_sync import GradSync
from .plan import Message, PostRecv, Send, next_stage, prev_stage, rank_plan
from .recompute import Replay, forward_again, forward_without_graph
from .split_backward import WeightGrad, backward_full, backward_input
from .twins import TwinSum

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Key = tuple[int, int]  # (stage, microbatch)


def check_schedule(schedule: Schedule, rank: int, world: int, stages: Mapping[int, nn.Module]) -> Instance:
    """Everything that would make a step fail or hang, found before any communication."""
    if not schedule.ops:
        raise ScheduleMismatchError(f"rank {rank}: schedule from {schedule.method!r} has status "
                                    f"{schedule.status!r} and no ops ({schedule.reason or 'no reason given'})")
    problem = schedule.problem
    if problem.devices != world:
        raise ScheduleMismatchError(f"rank {rank}: the schedule is for {problem.devices} devices but the "
                                    f"process group has {world} ranks")
    inst = Instance.from_problem(problem)
    errors = validate(schedule, inst)
    if errors:
        raise ScheduleMismatchError(f"rank {rank}: invalid schedule: " + "; ".join(errors[:5]))
    try:
        simulate(inst, rank_programs(schedule))
    except DeadlockError as e:
        raise ScheduleMismatchError(f"rank {rank}: the schedule would deadlock: {e}") from None
    mine = set(inst.stages_of_device[rank])
    missing, extra = sorted(mine - set(stages)), sorted(set(stages) - mine)
    if missing:
        raise ScheduleMismatchError(f"rank {rank}: the schedule places stages {sorted(mine)} on this rank "
                                    f"but no module was given for stage(s) {missing}")
    if extra:
        raise ScheduleMismatchError(f"rank {rank}: modules given for stage(s) {extra}, which the schedule "
                                    f"places on other ranks (this rank holds {sorted(mine)})")
    return inst


class PipelineExecutor:
    """Runs one rank's part of a schedule; build one per rank with that rank's stage modules."""

    def __init__(
        self,
        schedule: Schedule,
        stages: Mapping[int, nn.Module],
        loss_fn: LossFn,
        *,
        group: dist.ProcessGroup | None = None,
        timeout_s: float = 60.0,
        loss_reduction: Literal["mean", "sum"] = "mean",
        recompute: Collection[int] = (),
        data_parallel: dist.ProcessGroup | None = None,
        optimizer: torch.optim.Optimizer | None = None,
    ) -> None:
        keep_freed_host_memory()  # CPU ops then cost what the profiler measured (host_memory.py)
        self.rank = dist.get_rank(group)
        self.inst = check_schedule(schedule, self.rank, dist.get_world_size(group), stages)
        if loss_reduction not in ("mean", "sum"):
            raise ValueError(f"loss_reduction must be 'mean' or 'sum' (got {loss_reduction!r})")
        self.schedule = schedule
        self.stages = dict(stages)
        self.loss_fn = loss_fn
        self.loss_reduction = loss_reduction
        self.plan = rank_plan(schedule, self.rank, self.inst)
        self.split = self.inst.split_backward
        foreign = sorted(set(recompute) - set(self.stages))
        if foreign:
            raise ScheduleMismatchError(f"rank {self.rank}: recompute names stage(s) {foreign}, which this rank "
                                        f"does not hold (it holds {sorted(self.stages)})")
        self.recompute = frozenset(recompute)
        mine = {(o.stage, o.microbatch) for o in schedule.ops if o.device == self.rank and o.kind == "F"}
        self.prev = {k: prev_stage(self.inst, *k) for k in mine}  # None: the chain starts here
        self.next = {k: next_stage(self.inst, *k) for k in mine}  # None: the chain ends here (loss)
        params = [p for m in self.stages.values() for p in m.parameters()]
        self.device = params[0].device if params else torch.device("cpu")
        self.transport = Transport(self.rank, group, self.inst.num_stages, timeout_s, self.device)
        self.params = {s: [p for p in m.parameters() if p.requires_grad] for s, m in self.stages.items()}
        self.twins = (TwinSum(self.stages, self.inst.devices, self.rank, group, timeout_s)
                      if self.inst.placement == "dual" else None)
        self._shapes: dict[Key, tuple[torch.Size, torch.dtype]] = {}  # activation shapes, agreed on step 1
        self.steps_done = 0
        self.last_step_s = 0.0
        self.last_busy_s = 0.0  # time spent in this rank's compute ops during the last step
        self.last_op_s: dict[OpId, float] = {}  # compute time of each of this rank's ops in the last step
        #: per op of the last step, seconds from its start: (waiting for the input began, compute began, ended)
        self.last_timeline: dict[OpId, tuple[float, float, float]] = {}
        #: ``time.perf_counter()`` when the last step began: the timelines of several ranks (processes of
        #: one machine share the monotonic clock) line up on it
        self.last_step_t0 = 0.0
        self.last_op_cpu_s: dict[OpId, float] = {}  # this thread's CPU time per op: survives a loaded machine
        self.last_twin_s = 0.0  # the twin gradient sum after the last step (dual placement)
        #: the data-parallel gradient sync (:mod:`.grad_sync`) and the optimizer step that end a step
        self.sync = (GradSync(self.params, data_parallel, self.rank, timeout_s)
                     if data_parallel is not None and dist.get_world_size(data_parallel) > 1 else None)
        self.optimizer = optimizer
        last = "W" if self.split else "B"
        self._last_ops = {s: sum(1 for o in schedule.ops if o.device == self.rank and o.stage == s and o.kind == last)
                          for s in self.stages}
        self.last_sync_wait_s = 0.0  # waiting for the syncs after the last op of the last step
        self.last_optimizer_s = 0.0

    # ------------------------------------------------------------------ step
    def step(self, inputs: torch.Tensor | None = None, targets: torch.Tensor | None = None) -> torch.Tensor | None:
        """One training step; gradients accumulate into ``.grad`` (call ``zero_grad`` yourself).

        ``inputs`` is needed on a rank holding a chain's first stage, ``targets`` on one holding a last
        stage (the whole batch: each rank takes its microbatches).
        """
        firsts = sorted({s for (s, _), p in self.prev.items() if p is None})
        lasts = sorted({s for (s, _), n in self.next.items() if n is None})
        x_mbs = self._split(inputs, "inputs", firsts[0]) if firsts else []
        y_mbs = self._split(targets, "targets", lasts[0]) if lasts else []
        st = _Step(x_mbs, y_mbs, self._scales(x_mbs or y_mbs), first=self.steps_done == 0)
        # with twins the sync waits for their sum (both write .grad); otherwise each stage syncs once ready
        st.sync_left = dict(self._last_ops) if self.sync is not None and self.twins is None else {}
        t_step = time.perf_counter()
        if self.sync is not None:
            self.sync.start()
        for s, n in st.sync_left.items():
            if n == 0 and self.sync is not None:  # a stage that runs no op this step (a dual copy's)
                self.sync.ready(s)
        if self.twins is not None:
            self.twins.start()
        for instr in self.plan:
            if isinstance(instr, PostRecv):
                self._post_recv(st, instr.message)
            elif isinstance(instr, Send):
                self._send(st, instr.message)
            else:
                self._compute(st, instr.op)
        for p in st.sends:
            self.transport.wait(p, "end of step")
        left = [k for k, d in (("inputs", st.stage_in), ("outputs", st.stage_out), ("weight jobs", st.w_jobs)) if d]
        if left or st.recvs:
            raise PipelineError(f"rank {self.rank}: step ended with unused {', '.join(left) or 'receives'}: "
                                "the schedule does not cover every op of this rank")
        self.last_twin_s = 0.0
        if self.twins is not None:
            t_twin = time.perf_counter()
            self.twins.finish()
            self.last_twin_s = time.perf_counter() - t_twin
        self._end_of_step()
        self.last_step_s = time.perf_counter() - t_step
        self.last_step_t0 = t_step
        self.last_op_s = st.op_s
        self.last_op_cpu_s = st.op_cpu_s
        self.last_timeline = {op: (a - t_step, b - t_step, c - t_step) for op, (a, b, c) in st.timeline.items()}
        self.last_busy_s = sum(st.op_s.values())
        self.steps_done += 1
        return st.loss

    def _end_of_step(self) -> None:
        """The data-parallel syncs still running (or, with twins, all of them), then the optimizer."""
        t0 = time.perf_counter()
        if self.sync is not None:
            if self.twins is not None:
                for s in sorted(self.stages):
                    self.sync.ready(s)
            self.sync.finish()
        t1 = time.perf_counter()
        if self.optimizer is not None:
            self.optimizer.step()
        self.last_sync_wait_s, self.last_optimizer_s = t1 - t0, time.perf_counter() - t1

    # ------------------------------------------------------------------ instructions
    def _post_recv(self, st: _Step, msg: Message) -> None:
        key = (msg.consumer.stage, msg.op.microbatch)
        with self._comm_errors(f"posting the receive of {msg.op}'s output from rank {msg.src}"):
            if msg.direction == "grad":  # the shape of the activation this rank produced
                y = st.stage_out[key]
                shape, dtype = y.shape, y.dtype
            else:
                if st.first:
                    self._shapes[key] = self.transport.recv_header(msg, f"posting the receive for {msg.consumer}")
                shape, dtype = self._shapes[key]
            st.recvs[msg.op] = self.transport.irecv(msg, shape, dtype)

    def _send(self, st: _Step, msg: Message) -> None:
        key = (msg.op.stage, msg.op.microbatch)
        if msg.direction == "act":
            t = st.stage_out[key].detach()
            self._agree_shape((msg.consumer.stage, msg.op.microbatch), t, msg)
        else:
            t = st.in_grad.pop(key)
            if t is None:
                raise PipelineError(f"rank {self.rank}: {msg.op} produced no input gradient to send to rank "
                                    f"{msg.dst} (does stage {msg.op.stage}'s output depend on its input?)")
        with self._comm_errors(f"sending {msg.op}'s {'output' if msg.direction == 'act' else 'input gradient'} "
                               f"to rank {msg.dst}"):
            st.sends += self.transport.isend(msg, t, header=st.first and msg.direction == "act")
        st.sends = [p for p in st.sends if not p.work.is_completed()]  # drop finished sends

    def _compute(self, st: _Step, op: OpId) -> None:
        """Run one op; its remote input is waited for first (waiting is not busy time)."""
        t_wait = time.perf_counter()
        try:
            if op.kind == "F":
                x = self._forward_input(st, op)
                t0, c0 = time.perf_counter(), time.thread_time()
                self._forward(st, op, x)
            elif op.kind == "B":
                g = None if self.next[(op.stage, op.microbatch)] is None else self._output_grad(st, op)
                t0, c0 = time.perf_counter(), time.thread_time()
                self._backward(st, op, g)
            else:
                t0, c0 = time.perf_counter(), time.thread_time()
                st.w_jobs.pop((op.stage, op.microbatch)).run()
        except PipelineError:
            raise
        except Exception as e:
            raise PipelineError(f"rank {self.rank}: {op} failed: {type(e).__name__}: {e}") from e
        t_end = time.perf_counter()
        if op.stage in st.sync_left and op.kind == ("W" if self.split else "B"):
            st.sync_left[op.stage] -= 1
            if st.sync_left[op.stage] == 0 and self.sync is not None:
                self.sync.ready(op.stage)
        st.op_cpu_s[op] = time.thread_time() - c0
        st.op_s[op] = t_end - t0
        st.timeline[op] = (t_wait, t0, t_end)

    def _stage_forward(self, st: _Step, s: int, i: int, x: torch.Tensor, replay: Replay | None = None
                       ) -> tuple[torch.Tensor, Replay | None]:
        """Stage ``s`` on microbatch ``i`` (+ the loss where the chain ends): with the graph, without it
        (a recomputed stage's F), or again with it under F's random state (that stage's B)."""
        def run(module_in: torch.Tensor) -> torch.Tensor:
            y = self.stages[s](module_in)
            if self.next[(s, i)] is None:  # the loss is part of the last stage's F; its graph ends at B and W
                y = self.loss_fn(y, st.y_mbs[i]) * st.scales[i]
            return y

        if replay is not None:
            return forward_again(run, x, replay), None
        if s in self.recompute:
            return forward_without_graph(run, x)
        return run(x), None

    def _forward(self, st: _Step, op: OpId, x: torch.Tensor) -> None:
        s, i = op.stage, op.microbatch
        st.stage_in[(s, i)] = x
        y, replay = self._stage_forward(st, s, i, x)
        if replay is not None:
            st.replays[(s, i)] = replay
        if self.next[(s, i)] is None:
            st.loss = y.detach() if st.loss is None else st.loss + y.detach()
        st.stage_out[(s, i)] = y

    def _backward(self, st: _Step, op: OpId, g: torch.Tensor | None) -> None:
        s, i = op.stage, op.microbatch
        y, x = st.stage_out.pop((s, i)), st.stage_in.pop((s, i))
        if (s, i) in st.replays:  # recomputed stage: the forward again, with its graph this time
            y, _ = self._stage_forward(st, s, i, x, st.replays.pop((s, i)))
        if self.split:
            (gx,), st.w_jobs[(s, i)] = backward_input([y], [g], [x], self.params[s])
        else:
            (gx,) = backward_full([y], [g], [x])
        prev = self.prev[(s, i)]
        if prev is not None:
            if prev in self.stages:
                st.out_grad[(prev, i)] = gx
            else:
                st.in_grad[(s, i)] = gx

    def _forward_input(self, st: _Step, op: OpId) -> torch.Tensor:
        s, i = op.stage, op.microbatch
        prev = self.prev[(s, i)]
        if prev is None:
            return st.x_mbs[i]
        if prev in self.stages:  # local hand-off (V turn, or a whole pipeline on one rank)
            x = st.stage_out[(prev, i)].detach()
        else:
            x = self.transport.wait(st.recvs.pop(OpId("F", prev, i)), str(op))
        return x.requires_grad_(x.is_floating_point())

    def _output_grad(self, st: _Step, op: OpId) -> torch.Tensor:
        s, i = op.stage, op.microbatch
        nxt = self.next[(s, i)]
        if nxt in self.stages:
            return st.out_grad.pop((s, i))
        return self.transport.wait(st.recvs.pop(OpId("B", nxt, i)), str(op))

    # ------------------------------------------------------------------ helpers
    @contextmanager
    def _comm_errors(self, doing: str) -> Iterator[None]:
        """Turn a transport failure while posting an op into an error naming rank and op."""
        try:
            yield
        except PipelineError:
            raise
        except RuntimeError as e:
            raise PipelineError(f"rank {self.rank}: {doing} failed (peer died?): {str(e).splitlines()[0]}") from e

    def _split(self, t: torch.Tensor | None, name: str, stage: int) -> list[torch.Tensor]:
        m = self.inst.microbatches
        if t is None:
            raise PipelineError(f"rank {self.rank} holds stage {stage} and needs {name} for step()")
        if t.shape[0] < m:
            raise PipelineError(f"rank {self.rank}: {name} has batch size {t.shape[0]}, fewer than the "
                                f"schedule's {m} microbatches")
        return [c.to(self.device) for c in torch.tensor_split(t, m)]

    def _scales(self, mbs: list[torch.Tensor]) -> list[float]:
        """Each microbatch's share of the batch, ``n_i / N`` (1 with ``loss_reduction="sum"``)."""
        m = self.inst.microbatches
        if self.loss_reduction == "sum" or not mbs:
            return [1.0] * m
        total = sum(c.shape[0] for c in mbs)
        return [c.shape[0] / total for c in mbs]

    def _agree_shape(self, key: Key, t: torch.Tensor, msg: Message) -> None:
        known = self._shapes.get(key)
        if known is None:
            self._shapes[key] = (t.shape, t.dtype)
        elif known != (t.shape, t.dtype):
            raise PipelineError(f"rank {self.rank}: {msg.op} output is {tuple(t.shape)} {t.dtype} but was "
                                f"{tuple(known[0])} {known[1]} on the first step; shapes are agreed once "
                                "per executor (build a new one for a new batch shape)")


@dataclass
class _Step:
    """What one step holds between ops, keyed by (stage, microbatch); emptied as consumers run."""

    x_mbs: list[torch.Tensor]
    y_mbs: list[torch.Tensor]
    scales: list[float]
    first: bool  # first step of this executor: activation messages carry a shape header
    stage_in: dict[Key, torch.Tensor] = field(default_factory=dict)  # F's input, until B
    stage_out: dict[Key, torch.Tensor] = field(default_factory=dict)  # F's output (last stage: loss), until B
    out_grad: dict[Key, torch.Tensor] = field(default_factory=dict)  # dL/d output handed over locally
    in_grad: dict[Key, torch.Tensor | None] = field(default_factory=dict)  # B's result, until sent
    w_jobs: dict[Key, WeightGrad] = field(default_factory=dict)  # B's leftovers, until W
    replays: dict[Key, Replay] = field(default_factory=dict)  # recomputed stages: F's random state, until B
    recvs: dict[OpId, Pending] = field(default_factory=dict)  # posted receives by producing op
    sends: list[Pending] = field(default_factory=list)
    op_s: dict[OpId, float] = field(default_factory=dict)
    op_cpu_s: dict[OpId, float] = field(default_factory=dict)
    timeline: dict[OpId, tuple[float, float, float]] = field(default_factory=dict)  # absolute perf_counter
    loss: torch.Tensor | None = None
    sync_left: dict[int, int] = field(default_factory=dict)  # last-kind ops per stage before its gradient sync

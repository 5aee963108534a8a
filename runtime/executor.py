"""Replay a pipesched schedule on torch.distributed: this rank's ops, in the schedule's order.

One training step (:meth:`PipelineExecutor.step`) splits the batch into the schedule's m
microbatches and walks this rank's plan (:mod:`pipesched.runtime.plan`):

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
needs are dropped after its W (fused B: everything after B).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Literal

import torch
import torch.distributed as dist
from torch import nn

from pipesched.solver.instance import Instance, OpId
from pipesched.solver.schedule import Schedule
from pipesched.solver.simulate import DeadlockError, simulate
from pipesched.solver.torch_csv import rank_programs
from pipesched.solver.validate import validate

from .comm import Pending, Transport
from .errors import PipelineError, ScheduleMismatchError
from .plan import Message, PostRecv, Send, rank_plan
from .split_backward import WeightGrad, backward_full, backward_input

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
    ) -> None:
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
        self.last = self.inst.num_stages - 1
        params = [p for m in self.stages.values() for p in m.parameters()]
        self.device = params[0].device if params else torch.device("cpu")
        self.transport = Transport(self.rank, group, self.inst.num_stages, timeout_s, self.device)
        self.params = {s: [p for p in m.parameters() if p.requires_grad] for s, m in self.stages.items()}
        self._shapes: dict[Key, tuple[torch.Size, torch.dtype]] = {}  # activation shapes, agreed on step 1
        self.steps_done = 0
        self.last_step_s = 0.0
        self.last_busy_s = 0.0  # time spent in this rank's compute ops during the last step
        self.last_op_s: dict[OpId, float] = {}  # compute time of each of this rank's ops in the last step

    # ------------------------------------------------------------------ step
    def step(self, inputs: torch.Tensor | None = None, targets: torch.Tensor | None = None) -> torch.Tensor | None:
        """One training step; gradients accumulate into ``.grad`` (call ``zero_grad`` yourself).

        ``inputs`` is needed on the rank holding stage 0, ``targets`` on the rank holding the last stage.
        """
        m = self.inst.microbatches
        x_mbs = self._split(inputs, "inputs", 0) if 0 in self.stages else None
        y_mbs = self._split(targets, "targets", self.last) if self.last in self.stages else None
        scales = self._scales(x_mbs if x_mbs is not None else y_mbs, m)
        first_step = self.steps_done == 0  # every rank sends shape headers on its first step only

        stage_in: dict[Key, torch.Tensor] = {}  # F's input (leaf needing grad when it comes from a stage)
        stage_out: dict[Key, torch.Tensor] = {}  # F's output, or the scaled loss on the last stage
        out_grad: dict[Key, torch.Tensor] = {}  # dL/d output, handed over locally
        in_grad: dict[Key, torch.Tensor | None] = {}  # B's result, to send or hand over
        w_jobs: dict[Key, WeightGrad] = {}
        recvs: dict[OpId, Pending] = {}
        sends: list[Pending] = []
        loss_total: torch.Tensor | None = None
        busy = 0.0
        op_s: dict[OpId, float] = {}
        t_step = time.perf_counter()

        for instr in self.plan:
            if isinstance(instr, PostRecv):
                msg = instr.message
                with self._comm_errors(f"posting the receive of {msg.op}'s output from rank {msg.src}"):
                    recvs[msg.op] = self._post_recv(msg, stage_out, first_step)
                continue
            if isinstance(instr, Send):
                msg = instr.message
                key = (msg.op.stage, msg.op.microbatch)
                if msg.direction == "act":
                    t = stage_out[key].detach()
                    self._agree_shape((msg.consumer.stage, msg.op.microbatch), t, msg)
                    with self._comm_errors(f"sending {msg.op}'s output to rank {msg.dst}"):
                        sends += self.transport.isend(msg, t, header=first_step)
                else:
                    g = in_grad.pop(key)
                    if g is None:
                        raise PipelineError(f"rank {self.rank}: {msg.op} produced no input gradient to send to "
                                            f"rank {msg.dst} (does stage {msg.op.stage}'s output depend on its input?)")
                    with self._comm_errors(f"sending {msg.op}'s input gradient to rank {msg.dst}"):
                        sends += self.transport.isend(msg, g, header=False)
                sends = [p for p in sends if not p.work.is_completed()]  # drop finished sends
                continue
            op = instr.op
            s, i = op.stage, op.microbatch
            key = (s, i)
            try:
                # wait for this op's remote input first: waiting is not compute (busy time)
                if op.kind == "F":
                    x = self._forward_input(op, x_mbs, stage_in, stage_out, recvs)
                elif op.kind == "B":
                    g = None if s == self.last else self._output_grad(op, out_grad, recvs)
                t0 = time.perf_counter()
                if op.kind == "F":
                    stage_in[key] = x
                    y = self.stages[s](x)
                    if s == self.last:
                        loss = self.loss_fn(y, y_mbs[i]) * scales[i]
                        stage_out[key] = loss
                        loss_total = loss.detach() if loss_total is None else loss_total + loss.detach()
                        del loss  # else its graph outlives this microbatch's W
                    else:
                        stage_out[key] = y
                    del x, y
                elif op.kind == "B":
                    y = stage_out.pop(key)
                    x = stage_in.pop(key)
                    if self.split:
                        (gx,), w_jobs[key] = backward_input([y], [g], [x], self.params[s])
                    else:
                        (gx,) = backward_full([y], [g], [x])
                    del x, y, g
                    if s > 0:
                        if s - 1 in self.stages:
                            out_grad[(s - 1, i)] = gx
                        else:
                            in_grad[key] = gx
                else:
                    w_jobs.pop(key).run()
            except PipelineError:
                raise
            except Exception as e:
                raise PipelineError(f"rank {self.rank}: {op} failed: {type(e).__name__}: {e}") from e
            op_s[op] = time.perf_counter() - t0
            busy += op_s[op]

        for p in sends:
            self.transport.wait(p, "end of step")
        leftovers = [k for k, d in (("inputs", stage_in), ("outputs", stage_out), ("weight jobs", w_jobs)) if d]
        if leftovers or recvs:
            raise PipelineError(f"rank {self.rank}: step ended with unused {', '.join(leftovers) or 'receives'}: "
                                "the schedule does not cover every op of this rank")
        self.last_step_s = time.perf_counter() - t_step
        self.last_busy_s = busy
        self.last_op_s = op_s
        self.steps_done += 1
        return loss_total

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

    def _scales(self, mbs: list[torch.Tensor] | None, m: int) -> list[float]:
        if self.loss_reduction == "sum" or mbs is None:
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

    def _post_recv(self, msg: Message, stage_out: dict[Key, torch.Tensor], first_step: bool) -> Pending:
        i = msg.op.microbatch
        key = (msg.consumer.stage, i)
        if msg.direction == "grad":  # same shape as the activation this rank produced
            y = stage_out[key]
            return self.transport.irecv(msg, y.shape, y.dtype)
        if first_step:
            self._shapes[key] = self.transport.recv_header(msg, f"posting the receive for {msg.consumer}")
        shape, dtype = self._shapes[key]
        return self.transport.irecv(msg, shape, dtype)

    def _forward_input(self, op: OpId, x_mbs, stage_in, stage_out, recvs) -> torch.Tensor:
        s, i = op.stage, op.microbatch
        if s == 0:
            return x_mbs[i]
        if s - 1 in self.stages:  # local hand-off (V turn, or a whole pipeline on one rank)
            x = stage_out[(s - 1, i)].detach()
        else:
            x = self.transport.wait(recvs.pop(OpId("F", s - 1, i)), str(op))
        return x.requires_grad_(x.is_floating_point())

    def _output_grad(self, op: OpId, out_grad, recvs) -> torch.Tensor:
        s, i = op.stage, op.microbatch
        if s + 1 in self.stages:
            return out_grad.pop((s, i))
        return self.transport.wait(recvs.pop(OpId("B", s + 1, i)), str(op))

"""NCCL order without a GPU: every rank program the runtime lowers, and every exported CSV after torch's
own send/recv lowering, runs to its end under NCCL's point-to-point rules (tests/runtime/nccl_order.py:
matched in posting order with tags ignored, no send completes before its receive runs), for every
placement and for schedules with comm; and the model itself catches mis-ordered programs.

The programs are read from what is checked (the runtime's ``rank_plan``, torch's ``_add_send_recv``)
with the executor's and torch's runtime's rules for when a call is posted and waited on; which stage
feeds which is derived here from the placement, not taken from the runtime.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Hashable

import pytest
from nccl_order import Compute, Item, OrderError, Post, Wait, check
from torch.distributed.pipelining import schedules as ts

from pipesched.runtime.replay.plan import Compute as Run
from pipesched.runtime.replay.plan import (
    PostRecv,
    Send,
    TwinRecv,
    TwinSend,
    rank_plan,
    twin_exchange,
)
from pipesched.solver import Problem, Schedule, SolveOptions, solve
from pipesched.solver.core.instance import OpId
from pipesched.solver.formats.torch_csv import to_torch_csv

COMM = {"costs": {"comm": 0.7, "forward": [1.0, 1.4, 0.8, 1.1], "backward_input": [1.2, 1.0, 1.5, 0.9]}}
CASES = [  # (method, problem) for every placement, with and without comm, split and fused backward
    ("1f1b", Problem(devices=4, microbatches=6)),
    ("gpipe", Problem(devices=3, microbatches=5, split_backward=False)),
    ("zb-h1", Problem(devices=4, microbatches=8, **COMM)),
    ("greedy", Problem(devices=4, microbatches=6, **COMM)),
    ("interleaved-1f1b", Problem(devices=2, microbatches=4, stages_per_device=2)),
    ("looped-bfs", Problem(devices=2, microbatches=4, stages_per_device=3)),
    ("greedy", Problem(devices=2, microbatches=6, stages_per_device=2, costs={"comm": 0.5})),
    ("zb-v", Problem(devices=4, microbatches=8, stages_per_device=2, placement="v")),
    ("dualpipe-v", Problem(devices=4, microbatches=8, stages_per_device=2, placement="v",
                           costs={"comm": 0.3, "overlap_fb": 0.8})),
    ("greedy", Problem(devices=3, microbatches=6, stages_per_device=2, placement="v", costs={"comm": 0.4})),
    ("dualpipe", Problem(devices=4, microbatches=8, stages_per_device=2, placement="dual")),
    ("dualpipe", Problem(devices=2, microbatches=6, stages_per_device=2, placement="dual", costs={"comm": 0.5})),
]
IDS = [f"{m}-{p.placement}-v{p.stages_per_device}-p{p.devices}" + ("-comm" if p.costs.comm else "") for m, p in CASES]


@pytest.fixture(scope="module")
def schedules() -> list[Schedule]:
    return [solve(problem, method, SolveOptions(time_limit_s=2.0)) for method, problem in CASES]


# ---------------------------------------------------------------- the chain, from the placement alone
def _device(problem: Problem, stage: int) -> int:
    p = problem.devices
    return stage % p if problem.placement == "loop" else (stage if stage < p else 2 * p - 1 - stage)


def _chain(problem: Problem, microbatch: int) -> range:
    """The stage ids microbatch ``microbatch`` runs through, in order (dual: one copy, by dual_split)."""
    p = problem.devices
    if problem.placement != "dual":
        return range(p * problem.stages_per_device)
    down = microbatch < (problem.dual_split if problem.dual_split is not None else problem.microbatches // 2)
    return range(0, p) if down else range(p, 2 * p)


def _producer(problem: Problem, op: OpId) -> OpId | None:
    """The op whose output ``op`` reads (F: the previous stage's F; B: the next stage's B)."""
    chain = _chain(problem, op.microbatch)
    k = chain.index(op.stage)
    if op.kind == "F" and k > 0:
        return OpId("F", chain[k - 1], op.microbatch)
    if op.kind == "B" and k + 1 < len(chain):
        return OpId("B", chain[k + 1], op.microbatch)
    return None


# ---------------------------------------------------------------- the runtime's programs
def runtime_programs(schedule: Schedule, first_step: bool, twin_buckets: int = 2) -> list[list[Item]]:
    """What the executor posts and waits on, per rank: a receive is posted at its PostRecv (on the first
    step an activation's shape header first, waited on at once), a send at its Send (header first on the
    first step); an op waits for its remote input; the step ends waiting for its sends, then (dual) the
    twin sum posts its calls and waits for them."""
    problem = schedule.problem
    out = []
    for rank in range(problem.devices):
        prog: list[Item] = []
        sends: list[Hashable] = []
        for ins in rank_plan(schedule, rank):
            if isinstance(ins, PostRecv):
                m = ins.message
                if first_step and m.op.kind == "F":
                    prog += [Post("recv", m.src, ("header", m.op), ("header", m.op)), Wait(("header", m.op))]
                prog.append(Post("recv", m.src, ("data", m.op), ("recv", m.op)))
            elif isinstance(ins, Send):
                m = ins.message
                if first_step and m.op.kind == "F":
                    prog.append(Post("send", m.dst, ("header", m.op), ("send-header", m.op)))
                    sends.append(("send-header", m.op))
                prog.append(Post("send", m.dst, ("data", m.op), ("send", m.op)))
                sends.append(("send", m.op))
            elif isinstance(ins, Run):
                src = _producer(problem, ins.op) if ins.op.kind != "W" else None
                if src is not None and _device(problem, src.stage) != rank:
                    prog.append(Wait(("recv", src)))
                prog.append(Compute(str(ins.op)))
        prog += [Wait(h) for h in sends]
        if problem.placement == "dual":
            calls = twin_exchange(rank, problem.devices, twin_buckets)
            prog += [Post("send" if isinstance(c, TwinSend) else "recv", c.peer, ("twin", c.bucket), c) for c in calls]
            prog += [Wait(c) for c in calls]
        out.append(prog)
    return out


# ---------------------------------------------------------------- torch's lowering of the exported CSV
def torch_programs(schedule: Schedule) -> list[list[Item]]:
    """torch 2.13's ``_PipelineScheduleRuntime`` on our CSV: its own lowering passes (those its
    ``_prepare_schedule_with_comms`` runs for a compute_only CSV), then SEND/RECV posted where they
    stand and an F/I/B waiting for the receive of its input, sends waited at the step's end."""
    rows = [[ts._Action.from_str(a) for a in row] for row in csv.reader(io.StringIO(to_torch_csv(schedule)))]
    stage_rank = {sub.stage_index: r for r, row in enumerate(rows) for a in row for sub in (a.sub_actions or (a,))}
    stages, m = len(stage_rank), schedule.problem.microbatches
    lowered = {r: ts._add_reduce_grad(ts._add_unshard_reshard(row), m) for r, row in enumerate(rows)}
    lowered = ts._add_send_recv(lowered, stage_to_rank=lambda s: stage_rank[s], num_stages=stages)
    out = []
    for r in range(len(rows)):
        prog: list[Item] = []
        sends: list[Hashable] = []
        for a in lowered[r]:
            s, i, kind = a.stage_index, a.microbatch_index, a.computation_type
            if kind in (ts.SEND_F, ts.SEND_B):
                peer, msg = (s + 1, ("act", s, i)) if kind == ts.SEND_F else (s - 1, ("grad", s, i))
                prog.append(Post("send", stage_rank[peer], msg, a))
                sends.append(a)
            elif kind in (ts.RECV_F, ts.RECV_B):
                peer, msg = (s - 1, ("act", s - 1, i)) if kind == ts.RECV_F else (s + 1, ("grad", s + 1, i))
                prog.append(Post("recv", stage_rank[peer], msg, a))
            for sub in a.sub_actions or (a,):
                t = sub.computation_type
                if t == ts.F and sub.stage_index > 0 and stage_rank[sub.stage_index - 1] != r:
                    prog.append(Wait(ts._Action(sub.stage_index, ts.RECV_F, sub.microbatch_index)))
                if t in (ts.I, ts.B) and sub.stage_index < stages - 1 and stage_rank[sub.stage_index + 1] != r:
                    prog.append(Wait(ts._Action(sub.stage_index, ts.RECV_B, sub.microbatch_index)))
                if t in (ts.F, ts.I, ts.B, ts.W):
                    prog.append(Compute(str(sub)))
        out.append(prog + [Wait(h) for h in sends])
    return out


@pytest.mark.parametrize("streams", ["pair", "rank"])
@pytest.mark.parametrize("case", range(len(CASES)), ids=IDS)
def test_the_runtimes_rank_programs_run_under_nccl_order(schedules: list[Schedule], case: int, streams: str) -> None:
    for first_step in (True, False):
        check(runtime_programs(schedules[case], first_step), streams)


@pytest.mark.parametrize("streams", ["pair", "rank"])
@pytest.mark.parametrize("case", [k for k, (_, p) in enumerate(CASES) if p.placement != "dual"],
                         ids=[i for i, (_, p) in zip(IDS, CASES, strict=True) if p.placement != "dual"])
def test_the_exported_csv_after_torchs_lowering_runs_under_nccl_order(schedules: list[Schedule], case: int,
                                                                      streams: str) -> None:
    check(torch_programs(schedules[case]), streams)


# ---------------------------------------------------------------- the model catches what it must
def test_two_receives_from_one_peer_swapped_are_a_mismatch_tags_would_hide(schedules: list[Schedule]) -> None:
    programs = runtime_programs(schedules[0], first_step=False)
    prog = programs[1]
    recvs = [k for k, x in enumerate(prog) if isinstance(x, Post) and x.kind == "recv" and x.peer == 0]
    a, b = recvs[0], recvs[1]
    prog[a], prog[b] = prog[b], prog[a]
    with pytest.raises(OrderError, match="NCCL matches by order"):
        check(programs)


def test_sends_held_back_until_the_answer_they_feed_is_a_deadlock(schedules: list[Schedule]) -> None:
    programs = runtime_programs(schedules[0], first_step=False)  # 1F1B: rank 0 sends 4 forwards, then waits
    prog = programs[0]
    w = next(k for k, x in enumerate(prog) if isinstance(x, Wait))
    early = [x for x in prog[:w] if isinstance(x, Post) and x.kind == "send"]
    assert early
    programs[0] = [x for x in prog[:w] if x not in early] + [prog[w], *early, *prog[w + 1:]]
    with pytest.raises(OrderError, match="deadlock"):
        check(programs)


def test_twins_that_both_send_first_deadlock_and_the_runtimes_order_does_not() -> None:
    both_send_first = [[Post("send", 1 - r, ("twin", 0), "s"), Post("recv", 1 - r, ("twin", 0), "r"),
                        Wait("s"), Wait("r")] for r in range(2)]
    with pytest.raises(OrderError, match="deadlock"):
        check(both_send_first, "pair")
    ordered = [[Post("send" if isinstance(c, TwinSend) else "recv", c.peer, ("twin", c.bucket), c)
                for c in twin_exchange(r, 2, 3)] for r in range(2)]
    check([prog + [Wait(x.handle) for x in prog] for prog in ordered], "pair")
    assert isinstance(twin_exchange(1, 2, 1)[0], TwinRecv)


def test_one_stream_per_rank_is_stricter_than_one_per_pair() -> None:
    # a ring where each rank receives from its right neighbour before sending to its left one
    ring = [[Post("recv", (r + 1) % 3, ("x", (r + 1) % 3), "r"), Post("send", (r - 1) % 3, ("x", r), "s"),
             Wait("r"), Wait("s")] for r in range(3)]
    check(ring, "pair")
    with pytest.raises(OrderError, match="deadlock under NCCL \\(rank streams\\)"):
        check(ring, "rank")

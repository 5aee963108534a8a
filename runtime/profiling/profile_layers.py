"""Measure a network layer by layer (and the link between two ranks) into a planning :class:`Model`.

Each *distinct* layer is timed once: a kind is its module class and parameter shapes, so a model of
80 identical blocks profiles one block and writes it with ``repeat = 80``. Ops are timed as the
executor runs them: F = forward (+ the loss on the last layer), B = :func:`split_backward.backward_input`
(empty on a layer whose input needs no gradient, such as token ids), W = :meth:`WeightGrad.run`;
the median of ``repeats`` runs after ``warmup``, in ms (CUDA events on GPU, wall clock on CPU).

Memory (GiB): on GPU ``torch.cuda.memory_allocated`` after F and after B; on CPU the distinct
storages autograd saves during F, and after B what the W job still references (the gradients B
recorded for it and the saved tensors of every graph node reachable from the nodes it replays). With ``recompute`` the layer also
gets activation-checkpointing deltas: F keeps only its input, B re-runs F and keeps what W needs.

A fixed cost per op (Python dispatch, autograd set-up, the plan walk) does not shrink with the
layer: :func:`op_overhead` measures it on a one-weight layer. Pass it to :func:`profile_layers` to
take it out of every layer, then add it once per op of the Problem a split induces (a fixed cost
per op simply adds to that op's duration, so the Problem needs no new field).
:func:`profile_link` measures latency and bandwidth between two ranks by ping-pong; together
they give ``comm = latency + output / bandwidth`` (the :class:`Link` of the Cluster).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from pipesched.solver import Costs, Problem, solve
from pipesched.solver.planning import Layer, LayerMemory, Link, Model, Recompute

from ..host_memory import keep_freed_host_memory
from ..replay.split_backward import WeightGrad, backward_input

GIB = 2.0**30
Triple = tuple[float, float, float]


def layer_kind(module: nn.Module) -> tuple:
    """What makes two layers interchangeable for costs: class, parameter names, shapes and dtypes."""
    return (type(module).__module__, type(module).__qualname__,
            tuple((n, tuple(p.shape), str(p.dtype), p.requires_grad) for n, p in module.named_parameters()))


class OpClock:
    """Elapsed ms between marks: CUDA events on a GPU (no host sync per op), else the wall clock, or
    with ``cpu_time`` this thread's CPU time (on CPU only: what other work on the machine does not
    inflate, for checking the compute term on a loaded machine)."""

    def __init__(self, device: torch.device, cpu_time: bool = False) -> None:
        self.cuda = device.type == "cuda"
        self.now = time.thread_time if cpu_time else time.perf_counter
        self.marks: list = []

    def mark(self) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(self.now())

    def elapsed_ms(self) -> list[float]:
        if self.cuda:
            torch.cuda.synchronize()
            return [a.elapsed_time(b) for a, b in zip(self.marks, self.marks[1:], strict=False)]
        return [1e3 * (b - a) for a, b in zip(self.marks, self.marks[1:], strict=False)]


def _storage_bytes(tensors: Sequence[torch.Tensor], seen: dict[int, int]) -> None:
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.device.type != "meta":
            s = t.untyped_storage()
            seen[s.data_ptr()] = s.nbytes()


def _saved_of(node: object) -> list[torch.Tensor]:
    """Tensors an autograd node still holds (its ``_saved_*`` attributes; freed ones are skipped)."""
    out: list[torch.Tensor] = []
    for name in dir(node):
        if not name.startswith("_saved_"):
            continue
        try:
            value = getattr(node, name)
        except RuntimeError:  # already freed
            continue
        values = value if isinstance(value, (tuple, list)) else [value]
        out += [v for v in values if isinstance(v, torch.Tensor)]
    return out


def _w_bytes(job: WeightGrad) -> int:
    """Bytes a W job keeps alive: the gradients B recorded for it, and the saved tensors of every
    node it replays or can reach from them (B keeps the graph, so that whole part stays)."""
    seen: dict[int, int] = {}
    visited: set[object] = set()
    stack = [node for g in job.groups for node in g.nodes]
    for g in job.groups:
        for grads in g.grads.values():
            _storage_bytes([x for x in grads if x is not None], seen)
    while stack:
        node = stack.pop()
        if node is None or node in visited:
            continue
        visited.add(node)
        _storage_bytes(_saved_of(node), seen)
        stack += [child for child, _ in node.next_functions]
    return sum(seen.values())


@dataclass(frozen=True)
class _Measured:
    ms: Triple
    held_f: float  # bytes held after F
    held_b: float  # bytes held after B, until W
    input_bytes: float
    output_bytes: float


def _measure(module: nn.Module, x: torch.Tensor, loss: Callable[[torch.Tensor], torch.Tensor] | None,
             repeats: int, warmup: int, cpu_time: bool = False) -> tuple[_Measured, torch.Tensor]:
    """Time F, B, W of one layer; measure what it holds after F and after B; return its output."""
    device = x.device
    params = [p for p in module.parameters() if p.requires_grad]
    cuda = device.type == "cuda"
    times: list[list[float]] = []
    held_f = held_b = 0.0
    out = x
    for k in range(warmup + repeats):
        xi = x.detach().requires_grad_(x.is_floating_point())  # as the executor feeds a stage
        module.zero_grad(set_to_none=True)
        clock = OpClock(device, cpu_time)
        before = torch.cuda.memory_allocated(device) if cuda else 0
        saved: dict[int, int] = {}

        def pack(t: torch.Tensor, saved: dict[int, int] = saved) -> torch.Tensor:
            _storage_bytes([t], saved)
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            clock.mark()
            out = module(xi)
            y = loss(out) if loss is not None else out
        clock.mark()
        after_f = torch.cuda.memory_allocated(device) if cuda else 0
        g = None if loss is not None else torch.ones_like(y)
        grads, job = backward_input([y], [g], [xi], params)
        clock.mark()
        del grads  # sent upstream by the executor: not held by this layer
        after_b = torch.cuda.memory_allocated(device) if cuda else 0
        w_bytes = _w_bytes(job) if not cuda and k == warmup + repeats - 1 else 0
        clock.mark()  # the graph walk above is not W's time
        job.run()
        clock.mark()
        if k >= warmup:
            f_ms, b_ms, _, w_ms = clock.elapsed_ms()
            times.append([f_ms, b_ms, w_ms])
            held_f = (after_f - before) if cuda else sum(saved.values())
            held_b = (after_b - before) if cuda else w_bytes
        del y, job, g
    ms = tuple(statistics.median(t[i] for t in times) for i in range(3))
    module.zero_grad(set_to_none=True)
    nbytes = x.untyped_storage().nbytes() if x.is_floating_point() else 0
    return _Measured(ms, float(held_f), float(held_b), float(nbytes),
                     float(out.untyped_storage().nbytes())), out.detach()


def _deltas(held_f: float, held_b: float) -> LayerMemory:
    return LayerMemory(forward=held_f / GIB, backward_input=(held_b - held_f) / GIB, backward_weight=-held_b / GIB)


def op_overhead(device: torch.device | str = "cpu", repeats: int = 20, warmup: int = 5,
                cpu_time: bool = False) -> Triple:
    """Fixed (F, B, W) cost in ms of one op, measured on a one-weight layer fed a one-element input."""
    layer = nn.Linear(1, 1, bias=False).to(device)
    measured, _ = _measure(layer, torch.ones(1, 1, device=device), None, repeats, warmup, cpu_time)
    return measured.ms


def profile_layers(
    layers: Sequence[nn.Module],
    sample: torch.Tensor,
    *,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    sample_target: torch.Tensor | None = None,
    names: Sequence[str] | None = None,
    repeats: int = 5,
    warmup: int = 2,
    op_overhead: Triple | None = None,
    static_bytes_per_param: float | None = None,
    recompute: bool = True,
    cpu_time: bool = False,
) -> Model:
    """The :class:`Model` (ms, GiB, per microbatch) of ``layers`` run in order on ``sample``.

    ``sample`` is one microbatch of model input, on the device to profile; the last layer is timed
    with ``loss_fn(output, sample_target)`` (default: the output's mean). ``op_overhead`` (from
    :func:`op_overhead`) is subtracted from every measured op, floored at 0. ``static`` is the
    parameter count × ``static_bytes_per_param`` (default: 4 × the parameter's element size:
    weight, gradient and Adam's two moments). ``cpu_time`` (CPU only) times ops in this thread's CPU
    time instead of the wall clock.
    """
    if cpu_time and sample.device.type != "cpu":
        raise ValueError("cpu_time times host threads: it only applies to a model on the CPU")
    if not layers:
        raise ValueError("layers is empty: give the model's layers in order")
    if names is not None and len(names) != len(layers):
        raise ValueError(f"names has {len(names)} entries for {len(layers)} layers")
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats must be >= 1 and warmup >= 0 (got {repeats}, {warmup})")
    if loss_fn is not None and sample_target is None:
        raise ValueError("loss_fn needs sample_target (one microbatch of targets)")
    keep_freed_host_memory()  # time ops as a replay runs them (host_memory.py)

    def loss(out: torch.Tensor) -> torch.Tensor:
        return out.float().mean() if loss_fn is None else loss_fn(out, sample_target)

    measured: dict[tuple, _Measured] = {}  # one measurement per (kind, position class)
    name_of: dict[tuple, str] = {}
    entries: list[Layer] = []
    x = sample
    last = len(layers) - 1
    for k, module in enumerate(layers):
        # the first layer (no input gradient) and the last (with the loss) run differently: own kinds
        key = (layer_kind(module), k == 0 or not x.is_floating_point(), k == last)
        if key in measured:
            with torch.no_grad():
                x = module(x)
        else:
            measured[key], x = _measure(module, x, loss if k == last else None, repeats, warmup, cpu_time)
        name = _name(key, name_of, names[k] if names is not None else type(module).__name__.lower())
        if entries and entries[-1].name == name:
            entries[-1] = entries[-1].model_copy(update={"repeat": entries[-1].repeat + 1})
            continue
        entries.append(_layer(name, measured[key], module, op_overhead, static_bytes_per_param,
                              recompute and not key[1], sends=k != last))
    return Model(layers=entries)


def _name(key: tuple, name_of: dict[tuple, str], wanted: str) -> str:
    """``wanted``, or ``wanted#2``... when another kind already has that name (names identify kinds)."""
    if key not in name_of:
        taken = set(name_of.values())
        name, n = wanted, 1
        while name in taken:
            n += 1
            name = f"{wanted}#{n}"
        name_of[key] = name
    return name_of[key]


def _layer(name: str, m: _Measured, module: nn.Module, overhead: Triple | None, per_param: float | None,
           recompute: bool, sends: bool) -> Layer:
    f, b, w = (max(0.0, t - (overhead[i] if overhead else 0.0)) for i, t in enumerate(m.ms))
    static = sum(p.numel() * (per_param if per_param is not None else 4 * p.element_size())
                 for p in module.parameters())
    rc = Recompute(memory=_deltas(m.input_bytes, m.held_b)) if recompute else None  # F keeps only its input
    return Layer(name=name, forward=f, backward_input=b, backward_weight=w, memory=_deltas(m.held_f, m.held_b),
                 static=static / GIB, output=m.output_bytes / GIB if sends else 0.0, recompute=rc)


# ---------------------------------------------------------------- the link
@dataclass(frozen=True)
class LinkProfile:
    """Measured point-to-point link: one message of ``x`` GiB takes ``latency_ms + x / gib_per_ms``."""

    latency_ms: float
    gib_per_ms: float | None
    samples: tuple[tuple[int, float], ...]  # (bytes, one-way ms) medians

    def link(self) -> Link:
        """As the Cluster's :class:`Link` (ms, GiB)."""
        return Link(latency=self.latency_ms, bandwidth=self.gib_per_ms)


def profile_link(group: dist.ProcessGroup | None = None, sizes: Sequence[int] = (4, 2**12, 2**16, 2**20, 2**22),
                 repeats: int = 20, warmup: int = 3, ranks: tuple[int, int] = (0, 1)) -> LinkProfile:
    """Ping-pong float32 messages of ``sizes`` bytes between ``ranks`` of ``group``; every rank of the
    group calls this and gets rank ``ranks[0]``'s fit. One-way time is half the median round trip;
    latency and bandwidth are the least-squares line through (bytes, time)."""
    me = dist.get_rank(group)
    a, b = ranks
    samples: list[tuple[int, float]] = []
    if me in ranks:
        peer = dist.get_global_rank(group, b if me == a else a) if group is not None else (b if me == a else a)
        for size in sizes:
            buf = torch.zeros(max(1, size // 4), dtype=torch.float32)
            trips = []
            for k in range(warmup + repeats):
                t0 = time.perf_counter()
                if me == a:
                    dist.send(buf, peer, group=group)
                    dist.recv(buf, peer, group=group)
                else:
                    dist.recv(buf, peer, group=group)
                    dist.send(buf, peer, group=group)
                if k >= warmup:
                    trips.append(time.perf_counter() - t0)
            samples.append((buf.numel() * 4, 1e3 * statistics.median(trips) / 2))
    fit = [_fit(samples) if me == a else None]
    dist.broadcast_object_list(fit, src=dist.get_global_rank(group, a) if group is not None else a, group=group)
    return fit[0]


def _fit(samples: list[tuple[int, float]]) -> LinkProfile:
    """Least squares ``t = latency + bytes / bandwidth``; a flat or negative slope means no size cost."""
    n = len(samples)
    xs = [s / GIB for s, _ in samples]
    ts = [t for _, t in samples]
    mx, mt = sum(xs) / n, sum(ts) / n
    var = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (t - mt) for x, t in zip(xs, ts, strict=True)) / var if var > 0 else 0.0
    latency = max(0.0, mt - slope * mx)
    return LinkProfile(latency, 1.0 / slope if slope > 0 else None, tuple(samples))


# ---------------------------------------------------------------- the executor's own cost per op
def profile_dispatch(group: dist.ProcessGroup | None = None, latency_ms: float = 0.0, microbatches: int = 8,
                     steps: int = 6, timeout_s: float = 60.0) -> float:
    """Fixed cost (ms) the executor adds to every op beyond the op's own compute: sends and
    receives posted, the plan walked, waits woken up. Every rank of ``group`` calls this.

    How: replay 1F1B on one-weight stages (so compute is nearly nothing), take the median step
    (max over ranks) and the mean measured time of each op kind, then find by bisection the extra
    cost ``c`` per op for which the schedule predicts that step time with ``comm = latency_ms``.
    """
    from ..replay.executor import PipelineExecutor

    world, rank = dist.get_world_size(group), dist.get_rank(group)
    schedule = solve(Problem(devices=world, microbatches=microbatches), "1f1b")
    stages = {rank: nn.Linear(1, 1, bias=False)}
    ex = PipelineExecutor(schedule, stages, nn.functional.mse_loss, group=group, timeout_s=timeout_s)
    x, y = torch.ones(microbatches, 1), torch.zeros(microbatches, 1)
    walls, op_ms = [], {"F": [], "B": [], "W": []}
    for k in range(steps + 1):  # the first step also agrees shapes: not timed
        dist.barrier(group)
        t0 = time.perf_counter()
        ex.step(x, y)
        if k:
            walls.append(1e3 * (time.perf_counter() - t0))
            for op, sec in ex.last_op_s.items():
                op_ms[op.kind].append(1e3 * sec)
    step = torch.tensor([statistics.median(walls)], dtype=torch.float64)
    dist.all_reduce(step, op=dist.ReduceOp.MAX, group=group)
    mine = torch.tensor([statistics.mean(op_ms[k]) for k in "FBW"], dtype=torch.float64)
    dist.all_reduce(mine, group=group)
    f, b, w = (mine / world).tolist()

    def predicted(c: float) -> float:
        costs = Costs(forward=f + c, backward_input=b + c, backward_weight=w + c, comm=latency_ms)
        return solve(Problem(devices=world, microbatches=microbatches, costs=costs), "1f1b").makespan

    target, lo, hi = float(step.item()), 0.0, float(step.item())
    if predicted(lo) >= target:
        return 0.0
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if predicted(mid) < target else (lo, mid)
    return (lo + hi) / 2

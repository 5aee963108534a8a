"""Ops as text, and the one tie-break that orders ops with equal times.

Text form (torch.distributed.pipelining's action style): ``{stage}{kind}{microbatch}``, e.g. ``3F7``
is the forward of model stage 3 on microbatch 7, ``0B2`` a backward (the input gradient when the
backward is split), ``5W0`` a weight gradient. A per-device order is one line per device,
``d: op op ...``. :func:`parse_op` and :func:`parse_order` read what :func:`op_text` and
:func:`order_text` write, so an order can be written in a test, a log or an issue and read back.
(torch's own CSV names a split backward ``I``; :mod:`pipesched.solver.formats.torch_csv` lowers to it.)

Passes: the library transforms orders, not timed ops, the way torch's ``_add_send_recv`` and
``_merge_bw`` map one action list to another: a recipe or solver emits an :data:`Order`, re-timing
(:func:`pipesched.solver.timing.retime.retime`) times it, the local search
(:func:`pipesched.solver.heuristics.swap_past_w.polish`) maps it to a better order, and the torch
lowering (:func:`pipesched.solver.formats.torch_csv.torch_actions`) maps it to torch's actions.
"""

from __future__ import annotations

import re

from .instance import OpId
from .schedule import Order

_OP = re.compile(r"(\d+)([FBW])(\d+)")


def dependency_rank(op: OpId, num_stages: int) -> int:
    """Position of ``op`` in its microbatch's chain ``F(0..S-1) -> B(S-1..0) -> W(0..S-1)``.

    The one tie-break for ops with equal start and end (zero-cost ops): sorting by it never puts
    an op before one it depends on (F before B at the last stage, B(s+1) before B(s) at a V turn,
    every W after the B it needs). Used by the CP-SAT read-back, the torch CSV and the runtime plan.
    """
    if op.kind == "F":
        return op.stage
    if op.kind == "B":
        return 2 * num_stages - 1 - op.stage
    return 2 * num_stages + op.stage


def op_text(op: OpId) -> str:
    """``OpId("F", 3, 7)`` -> ``"3F7"``."""
    return f"{op.stage}{op.kind}{op.microbatch}"


def parse_op(text: str) -> OpId:
    """``"3F7"`` -> ``OpId("F", 3, 7)``; a clear ValueError for anything else."""
    m = _OP.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"op {text!r} is not STAGE KIND MICROBATCH with KIND one of F, B, W (e.g. '3F7')")
    return OpId(m.group(2), int(m.group(1)), int(m.group(3)))  # type: ignore[arg-type]


def order_text(order: Order) -> str:
    """One line per device: ``"0: 0F0 0F1 0B0 ..."``."""
    return "\n".join(f"{d}: " + " ".join(op_text(op) for op in ops) for d, ops in enumerate(order)) + "\n"


def parse_order(text: str) -> Order:
    """Read :func:`order_text`'s form back; devices must be listed 0, 1, ... in order."""
    order: Order = []
    for n, line in enumerate(ln for ln in text.splitlines() if ln.strip()):
        head, sep, body = line.partition(":")
        if not sep or head.strip() != str(n):
            raise ValueError(f"line {n + 1} of the order must start with '{n}:' (device {n}), got {line!r}")
        order.append([parse_op(tok) for tok in body.split()])
    return order

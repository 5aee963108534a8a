"""A model of NCCL point-to-point semantics, to check rank programs for deadlock without a GPU.

Written apart from the runtime (it imports nothing of pipesched): a program is, per rank, a list of
:class:`Post` (an ``isend`` / ``irecv`` call, which returns at once), :class:`Wait` (block until a posted
call completes) and :class:`Compute` (a label). The rules, NCCL's rather than gloo's (gloo buffers sends
and matches by tag, so a gloo run cannot show an order NCCL would hang on):

- Matching is by posting order, tags ignored: the k-th send rank a posts to rank b meets the k-th
  receive b posts from a. Both must carry the same message, or data lands in the wrong buffer.
- Calls run in posting order on a stream and a send does not complete before its receive runs (no
  buffering): a call completes only when it and its partner are each at the head of their stream.
  ``streams="pair"``: one stream per pair of ranks (torch's lazily made two-rank communicators);
  ``streams="rank"``: one stream per rank for every peer (a communicator shared by all peers: torch's
  batched p2p and its eager-init mode). The second is the stricter.
- A host blocks at a :class:`Wait` until that call completed (a GPU would let later calls be posted
  first: posting fewer calls can only remove progress, so a program that passes here passes there).

:func:`check` runs every program to its end or raises :class:`OrderError` naming what is stuck.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Literal

Streams = Literal["pair", "rank"]


@dataclass(frozen=True)
class Post:
    """``kind`` (send/recv) of ``message`` to/from ``peer``; ``handle`` names it for a later Wait."""

    kind: Literal["send", "recv"]
    peer: int
    message: Hashable
    handle: Hashable


@dataclass(frozen=True)
class Wait:
    handle: Hashable


@dataclass(frozen=True)
class Compute:
    label: str


Item = Post | Wait | Compute


class OrderError(AssertionError):
    """The programs deadlock, mismatch a message, or leave a call unmatched."""


@dataclass
class _Rank:
    program: Sequence[Item]
    pc: int = 0
    posted: dict[Hashable, tuple[Post, int]] = field(default_factory=dict)  # handle -> (call, pair index)
    done: set[Hashable] = field(default_factory=set)


def check(programs: Sequence[Sequence[Item]], streams: Streams = "pair") -> None:
    """Run the programs under NCCL's rules; raise OrderError unless every rank reaches its end."""
    ranks = [_Rank(p) for p in programs]
    queues: dict[tuple[int, int | None], deque[Hashable]] = {}
    counts: dict[tuple[str, int, int], int] = {}  # (kind, rank, peer) -> calls posted so far

    def stream(rank: int, peer: int) -> tuple[int, int | None]:
        return (rank, peer if streams == "pair" else None)

    def advance(r: int) -> bool:
        moved, st = False, ranks[r]
        while st.pc < len(st.program):
            item = st.program[st.pc]
            if isinstance(item, Post):
                if item.handle in st.posted:
                    raise OrderError(f"rank {r}: handle {item.handle!r} posted twice")
                if item.peer == r or not 0 <= item.peer < len(ranks):
                    raise OrderError(f"rank {r}: {item.kind} with peer {item.peer}")
                key = (item.kind, r, item.peer)
                st.posted[item.handle] = (item, counts.get(key, 0))
                counts[key] = counts.get(key, 0) + 1
                queues.setdefault(stream(r, item.peer), deque()).append(item.handle)
            elif isinstance(item, Wait):
                if item.handle not in st.posted:
                    raise OrderError(f"rank {r} waits on {item.handle!r}, which it never posted before")
                if item.handle not in st.done:
                    return moved
            st.pc += 1
            moved = True
        return moved

    def match() -> bool:
        moved = False
        for (r, _), queue in list(queues.items()):
            while queue:
                call, k = ranks[r].posted[queue[0]]
                other = queues.get(stream(call.peer, r))
                if not other:
                    break
                partner, j = ranks[call.peer].posted[other[0]]
                if partner.peer != r or partner.kind == call.kind or j != k:
                    break  # the peer's head is another call: wait for it to move
                if partner.message != call.message:
                    send, recv = (call, partner) if call.kind == "send" else (partner, call)
                    a, b = (r, call.peer) if call.kind == "send" else (call.peer, r)
                    raise OrderError(f"rank {a}'s send #{k} to rank {b} carries {send.message!r} but rank {b}'s "
                                     f"receive #{k} from rank {a} expects {recv.message!r} (NCCL matches by order)")
                ranks[r].done.add(queue.popleft())
                ranks[call.peer].done.add(other.popleft())
                moved = True
        return moved

    while True:
        moved = any([advance(r) for r in range(len(ranks))])
        moved = match() or moved
        if not moved:
            break
    stuck = [r for r, st in enumerate(ranks) if st.pc < len(st.program)]
    if stuck:
        lines = [f"rank {r} blocked at item {ranks[r].pc} {ranks[r].program[ranks[r].pc]!r}, stream heads "
                 f"{_heads(r, ranks, queues)}" for r in stuck]
        raise OrderError(f"deadlock under NCCL ({streams} streams):\n" + "\n".join(lines))
    left = {key: [ranks[key[0]].posted[h][0] for h in q] for key, q in queues.items() if q}
    if left:
        raise OrderError(f"calls never matched (a send without its receive or the reverse): {left}")


def _heads(r: int, ranks: list[_Rank], queues: dict[tuple[int, int | None], deque[Hashable]]) -> list[Post]:
    return [ranks[r].posted[q[0]][0] for (rank, _), q in queues.items() if rank == r and q]

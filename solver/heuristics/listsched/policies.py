"""The named list policies: data, each set with the cases and the command that chose it.

A policy is a frozen record of rules (admission, priority, W deferral) for one of the engine's
schedulers (:mod:`.engine`); a :class:`PolicySet` names a tuple of them and says where it came from
(:class:`ChosenBy`). Tuning sets: ``benchmarks/cases.py`` (``tuning()``). Where a set was chosen on cases
that are not kept in the repository, its record says so: re-deriving it is pending, and nothing here
was re-tuned when the records were written.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ChosenBy:
    """Where a policy set came from: the ``command`` that chose it (or how it was chosen), on ``cases``."""

    command: str
    cases: str
    note: str = ""


@dataclass(frozen=True)
class PolicySet:
    """A named, ordered tuple of policies (earlier ones first), and its provenance."""

    name: str
    policies: tuple[Any, ...]
    chosen_by: ChosenBy


@dataclass(frozen=True)
class GreedyPolicy:
    """Method ``greedy``'s rule (:mod:`..greedy`): rank of each kind (lower runs first; within a kind the
    oldest microbatch) and the switches that bend it."""

    name: str
    rank: dict[str, int]
    patient: bool = False
    alternate: bool = False  # swap F and B ranks after each B or F, as in 1F1B's steady state
    headroom: bool = False  # a microbatch new to a device must leave room for an older one's next F
    follow: str | None = None  # "lean" or "wide": run a recipe's order, adapted to the limit


_BFW = {"B": 0, "F": 1, "W": 2}
GREEDY = PolicySet("greedy", (
    GreedyPolicy("default", _BFW),
    GreedyPolicy("eager-w", {"B": 0, "W": 1, "F": 2}),
    GreedyPolicy("patient", _BFW, patient=True),
    GreedyPolicy("alternate", _BFW, alternate=True),
    GreedyPolicy("headroom", _BFW, headroom=True),
    GreedyPolicy("alternate-headroom", _BFW, alternate=True, headroom=True),
    GreedyPolicy("follow-lean", {}, follow="lean"),
    GreedyPolicy("follow-wide", {}, follow="wide"),
), ChosenBy("not tuned: written as rules (solver/heuristics/greedy.py's docstring gives each one's reason)",
            "none", "method greedy runs every policy and keeps the best order, so their order does not matter"))


@dataclass(frozen=True)
class Policy:
    """One point of the zero-bubble heuristic's grid (:mod:`..zero_bubble`).

    ``extra``: forwards a stage may have in flight beyond the 1F1B count (``S - s``); None lets
    only memory cap them. ``w``: "eager" runs W whenever nothing else is ready; "fits" only when
    the next known arrival is at least a W away (the paper's bubble filling). ``f_first``: prefer
    a ready F over a ready B while the stage is under its in-flight cap (ZB-H2-like warm-up).
    ``b_wait``: keep the device free for a B that is already on its way (it shortens the round
    trip every upstream stage waits on).
    """

    extra: int | None = 0
    w: str = "fits"
    f_first: bool = False
    b_wait: bool = False  # do not start an F (or W) when a known B would arrive before it ends
    scale: float = 1.0  # in-flight cap is ceil(scale * (S - s)) + extra: more warm-up on early stages


#: The head of the zero-bubble grid (the rest is an enumeration, :func:`..zb_policies.policies`). Rule:
#: first the policy with the least worst-case excess when it runs alone, then greedy on the mean excess
#: until a policy gains under 0.02 points. Held-out gains (mean excess drop when it joins the grid, auto at
#: 1, 10 and 60 s): ``Policy(1, "fits")`` -0.047 points (it displaces a tail policy), ``Policy(-2, "eager",
#: scale=2.15)`` (the long round trip of deep pipelines under a 2p-like cap) 0.372 points.
ZB_HEAD = PolicySet("zb-head", (
    Policy(1, "fits"),
    Policy(-2, "eager", scale=2.15),
), ChosenBy("python benchmarks/tune_zb_policies.py", "the tuning set of benchmarks/cases.py (tuning(), 30 cases)",
            "tables and revisions: benchmarks/results/tune_zb_policies.md"))


@dataclass(frozen=True)
class VPolicy:
    """One point of ``zb-v-greedy``'s grid (:mod:`..v_greedy`).

    ``warm``: scale of the ZB-V warm-up count ``2(p - d) - 1`` (chunk-0 forwards before the turn).
    ``steady``: scale of the chunk-0 in-flight cap after the turn (None: memory alone caps it).
    ``w``: "fits" runs an idle-time W only when it ends before the next known arrival; "eager" always.
    ``rank``: which ready op runs first: ``B1`` / ``F1`` are chunk 1's B and F, ``B0`` / ``F0`` chunk 0's.
    B first frees memory and feeds the device above; ``F0`` first starts the longest remaining path
    (a chunk-0 forward has the whole round trip after it), which the cool-down needs.
    """

    warm: float = 1.0
    steady: float | None = None
    w: str = "fits"
    rank: tuple[str, ...] = ("B1", "B0", "F1", "F0")
    extra: int = 0  # added to both counts


V = PolicySet("zb-v-greedy", (
    VPolicy(1.0, None, "eager", ("F1", "B1", "F0", "B0")),
    VPolicy(1.0, None, "fits", ("F1", "B1", "F0", "B0")),
    VPolicy(1.0, None, "fits", ("B1", "F1", "F0", "B0")),
    VPolicy(1.0, None, "eager", ("B1", "F1", "F0", "B0"), extra=1),
    VPolicy(1.0, None, "eager", ("B1", "B0", "F1", "F0")),
), ChosenBy("a greedy set cover of 288 policies (in-flight scales 0.4 .. 1 and None, warm-up scales 1 .. 2, "
            "both W rules, four ranks, extra 0 / 1); the command was not kept",
            "the V cases of the tuning set of benchmarks/cases.py plus p = 4, 8, m = 2p cases at caps 1p and "
            "1.25p (6.2B, 28.3B), never the reported m = 3p ones",
            "chosen on cases not kept (the m = 2p additions); re-derivation pending. The first four reach the "
            "best of all 288 there; the fifth (ZB-V's B-first priority) is kept as insurance"))


@dataclass(frozen=True)
class VMPolicy:
    """One point of ``v-memory``'s list scheduler (:mod:`..v_memory`): priority ``rank``, Ws ``hold``
    (a W first when more wait), W rule ``w``, admissions beyond ZB-V's count ``extra`` (None: memory
    alone), and ``turn``: a new microbatch needs room for its chunk-1 forward too (the turn of the V)."""

    rank: tuple[str, ...] = ("B1", "B0", "F1", "F0")
    hold: int | None = None
    w: str = "fits"
    extra: int | None = 0
    turn: bool = True


VM = PolicySet("v-memory", (
    VMPolicy(("B1", "F1", "F0", "B0"), None, "eager", None, True),
    VMPolicy(("B0", "F1", "F0", "B1"), None, "eager", 1, True),
), ChosenBy("a greedy set cover over 288 policies (the 24 ranks, both W rules, extra 0 / 1 / None, with "
            "and without the turn's room); the command was not kept",
            "V cases at 1.5p (14.6B and 28.3B, p = 4 and 8, m = 2p and 4p) built from the paper's profiles, "
            "not the drawn cases of benchmarks/cases.py",
            "chosen on cases not kept; re-derivation pending. Both reach the best of all 288 on every one of them"))


VM_WIDE = PolicySet("v-memory-wide", tuple(
    VMPolicy(rank, None, w, None, turn)
    for rank in itertools.permutations(("B1", "B0", "F1", "F0")) for w in ("fits", "eager") for turn in (True, False)
), ChosenBy("not chosen: the whole family that admits by memory alone, in product order; its run order "
            "(budget.V_WIDE_GRID_ORDER) ranks them by their mean ratio to the best of 480 policies",
            "V cases at 1.5p (14.6B, 28.3B, 1.5B, 6.2B; p = 4, 8; m = 2p, 4p), not kept in benchmarks/cases.py",
            "the ranking was chosen on cases not kept; re-derivation pending; python benchmarks/v_placement.py "
            "re-checks it"))


#: ``VM_WIDE``'s run order in ``v_memory.wide_candidates`` (indices into its policies; the first
#: ``V_WIDE_GRID_PER_TRIAL`` per trial of the search run): ``python benchmarks/tune_list_policies.py --set
#: v-wide``'s ranking, copied from its results JSON (tests/solver/test_list_policies.py checks they agree).
V_WIDE_GRID_ORDER: tuple[int, ...] = (
    66, 14, 54, 55, 67, 39, 63, 71, 38, 62, 70, 15, 59, 35, 3, 2, 26, 27, 11, 10, 65, 36, 60, 68, 53, 51, 13,
    52, 69, 61, 24, 37, 64, 48, 1, 0, 49, 25, 34, 58, 12, 50, 9, 57, 33, 8, 32, 56, 22, 78, 30, 82, 42, 74, 6,
    18, 20, 76, 94, 86, 46, 90, 4, 16, 80, 72, 40, 28, 92, 44, 84, 88, 23, 79, 31, 43, 83, 7, 19, 75, 21, 77,
    5, 17, 73, 29, 41, 81, 47, 87, 95, 91, 45, 85, 93, 89,
)


@dataclass(frozen=True)
class ILPolicy:
    """One point of the interleaved memory greedy's grid (:mod:`..interleaved_memory`): forward rule, W
    rule, Ws held, extra admissions."""

    forward: str = "switch"
    w: str = "fits"
    hold: int | None = None
    extra: int = 0
    lag: int | None = None  # with a lag: each device's forwards in ``forward_sequence`` order
    alternate: bool = False  # F after B and B after F when both can run (1F1B's steady state)


#: The first eight follow the forward sequence (lag 1: the p = 2 ILP optimum's forward order; lag 2: one
#: round later), F and B alternating as in 1F1B, with either W rule and the IZB warm-up or one more
#: admission; the next eight keep IZB's warm-up, then run the deepest ready forward (the p = 2 optimum's
#: first difference, decided op by op); the last two choose each forward freely, deepest chunk first.
INTERLEAVED = PolicySet("interleaved-memory", tuple(
    ILPolicy("seq", w, None, extra, lag, True)
    for lag in (1, 2)
    for w in ("fits", "eager")
    for extra in (0, 1)
) + tuple(
    ILPolicy("warm-deep", w, None, extra, 1, alternate)
    for alternate in (True, False)
    for w in ("fits", "eager")
    for extra in (0, 1)
) + (ILPolicy("deep", "fits", None, 0), ILPolicy("deep", "fits", None, 1)),
    ChosenBy("derived by hand from the ILP optimum's order on one case; the command was not kept",
             "the 1.5B loop v2 family shrunk to p = 2, m = 4 under IZB's peak as the cap; not in "
             "benchmarks/cases.py, never the anchors' reported cases",
             "chosen on cases not kept; re-derivation pending"))

#: Every named set, for listing (``benchmarks/list_orders.py``) and for the provenance test.
SETS: tuple[PolicySet, ...] = (GREEDY, ZB_HEAD, V, VM, VM_WIDE, INTERLEAVED)

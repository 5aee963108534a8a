"""The named list policies: data, each set with the cases and the command that chose it.

A policy is a frozen record of rules (admission, priority, W deferral) for one of the engine's
schedulers (:mod:`.engine`); a :class:`PolicySet` names a tuple of them and says where it came from
(:class:`ChosenBy`). Tuning sets: ``benchmarks/cases.py`` (``tuning()`` for the zero-bubble head,
``v_tuning()`` and ``interleaved_tuning()`` for the V and interleaved sets, chosen by
``benchmarks/tune_list_policies.py``); tests/solver/test_list_policies.py checks each set equals the choice
its script recorded in ``benchmarks/results``.
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
#: until a policy gains under 0.02 points, over a plain pool (warm-up scales 1 to 3 in steps of 0.1).
#: Development-set gains (mean excess drop when it joins the grid, auto's cuts at 1, 10 and 60 s):
#: ``Policy(1, "fits")`` -0.047 points (it displaces a tail policy), ``Policy(1, "eager", scale=1.6)`` 0.349.
ZB_HEAD = PolicySet("zb-head", (
    Policy(1, "fits"),
    Policy(1, "eager", scale=1.6),
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


#: ``python benchmarks/tune_list_policies.py --set v-greedy``'s choice, best first: greedy forward selection
#: over 1152 policies (warm-up scale 1 / 1.5 / 2 x chunk-0 in-flight scale 0.5 / 0.75 / 1 / None x both W
#: rules x the 24 ranks x extra 0 / 1), scored beside ZB-V's order when it fits (as ``v_candidates`` runs it).
V = PolicySet("zb-v-greedy", (
    VPolicy(1.0, None, "eager", ("F1", "B1", "F0", "B0"), 1),
    VPolicy(1.0, None, "eager", ("F1", "F0", "B1", "B0"), 1),
    VPolicy(1.5, None, "eager", ("B1", "F1", "F0", "B0"), 0),
    VPolicy(1.0, None, "fits", ("B1", "F1", "F0", "B0"), 1),
), ChosenBy("python benchmarks/tune_list_policies.py --set v-greedy",
            "the V tuning set of benchmarks/cases.py (v_tuning(), 18 cases)",
            "rule and tables: benchmarks/results/tune_list_policies_v-greedy.md; a fifth policy would gain "
            "under the rule's 0.05 points"))


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


#: ``python benchmarks/tune_list_policies.py --set v-memory``'s choice: greedy forward selection over 864
#: policies (the 24 ranks x hold None / 0 / 1 x both W rules x extra 0 / 1 / None x with and without the
#: turn's room), scored beside ZB-V's order and its deferred-W order (no search).
VM = PolicySet("v-memory", (
    VMPolicy(("F1", "F0", "B1", "B0"), None, "eager", None, True),
    VMPolicy(("B1", "F1", "F0", "B0"), None, "eager", None, True),
), ChosenBy("python benchmarks/tune_list_policies.py --set v-memory",
            "the V tuning set of benchmarks/cases.py (v_tuning(), 18 cases)",
            "rule and tables: benchmarks/results/tune_list_policies_v-memory.md; the second policy was the "
            "first one of the set before"))


VM_WIDE = PolicySet("v-memory-wide", tuple(
    VMPolicy(rank, None, w, None, turn)
    for rank in itertools.permutations(("B1", "B0", "F1", "F0")) for w in ("fits", "eager") for turn in (True, False)
), ChosenBy("not chosen: the whole family that admits by memory alone, in product order; its run order "
            "(V_WIDE_GRID_ORDER) is python benchmarks/tune_list_policies.py --set v-wide's ranking by mean ratio "
            "to the best of the 864-policy v-memory pool",
            "the V tuning set of benchmarks/cases.py (v_tuning(), 18 cases)",
            "tables: benchmarks/results/tune_list_policies_v-wide.md"))


#: ``VM_WIDE``'s run order in ``v_memory.wide_candidates`` (indices into its policies; the first
#: ``V_WIDE_GRID_PER_TRIAL`` per trial of the search run): ``python benchmarks/tune_list_policies.py --set
#: v-wide``'s ranking, copied from its results JSON (tests/solver/test_list_policies.py checks they agree).
V_WIDE_GRID_ORDER: tuple[int, ...] = (
    66, 14, 54, 70, 62, 38, 55, 67, 15, 39, 71, 63, 35, 59, 2, 26, 10, 12, 50, 58, 27, 34, 64, 68, 51, 52, 24, 8,
    0, 53, 65, 11, 3, 36, 60, 13, 56, 61, 48, 32, 37, 69, 9, 49, 1, 33, 57, 25, 22, 78, 90, 94, 46, 86, 6, 18, 74,
    30, 42, 82, 76, 20, 88, 4, 84, 44, 16, 72, 80, 40, 92, 28, 47, 7, 23, 79, 31, 43, 91, 95, 87, 29, 41, 19, 75,
    5, 83, 45, 21, 77, 17, 73, 81, 85, 89, 93
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


#: ``python benchmarks/tune_list_policies.py --set interleaved``'s choice, best first: greedy forward
#: selection over 144 policies (forward rules shallow / switch / deep, warm-deep after IZB's warm-up, the
#: forward sequence at lag 1 or 2; both W rules; hold None / 0; extra 0 / 1 / 2; alternate or not).
INTERLEAVED = PolicySet("interleaved-memory", (
    ILPolicy("warm-deep", "eager", None, 2, 1, True),
    ILPolicy("deep", "eager", None, 2, None, True),
    ILPolicy("warm-deep", "fits", None, 2, 1, True),
    ILPolicy("seq", "eager", None, 2, 2, True),
    ILPolicy("deep", "eager", None, 2, None, False),
    ILPolicy("warm-deep", "eager", None, 1, 1, True),
), ChosenBy("python benchmarks/tune_list_policies.py --set interleaved",
            "the interleaved tuning set of benchmarks/cases.py (interleaved_tuning(), 18 cases, loop v = 2 / 4, "
            "caps 1 to 1.25 times IZB's peak)",
            "rule and tables: benchmarks/results/tune_list_policies_interleaved.md; it replaces 18 policies "
            "derived by hand from the ILP optimum's order on one p = 2, m = 4 case"))

#: Every named set, for listing (``benchmarks/list_orders.py``) and for the provenance test.
SETS: tuple[PolicySet, ...] = (GREEDY, ZB_HEAD, V, VM, VM_WIDE, INTERLEAVED)

"""Float tolerances, named once: when two times are equal, and when a memory level is within its cap.

Why tolerances at all: times and memory levels are sums of user floats (``0.1 + 0.2 != 0.3``), so an
exact comparison would call a schedule that meets its bound "open" or one at its cap "over". The
relative part (1e-9) is far below any cost a user writes and far above the rounding of a few
thousand additions; the absolute part keeps a cap of 0 (or a time of 0) meaningful.
"""

from __future__ import annotations

#: Relative tolerance of every comparison below.
REL_TOL = 1e-9
#: Absolute slack added to a memory cap (so a cap of 0 still admits float noise).
CAP_ABS_TOL = 1e-12
#: Absolute gap under which two event times of one list-scheduling pass are the same instant (an op
#: "has arrived", a W "fits" before the next arrival). Absolute, not relative: the list schedulers
#: compare times of one problem built from the same sums, and their answers were tuned with it.
EVENT_TOL = 1e-9
#: Relative tolerance of the validator (and of recognising an F&B pair's length in a timed schedule):
#: schedules on the wire are rounded to ``TIME_DECIMALS`` places, far coarser than :data:`REL_TOL`.
WIRE_REL_TOL = 1e-7
#: Relative step of the exact re-timing's parametric search (its Bellman-Ford rounds): far below
#: :data:`REL_TOL`, so the optimum it converges to is within the comparisons above.
SEARCH_REL_TOL = 1e-12
#: Absolute tolerance of the shared-cores replay (remaining work of an op, an arrival "now").
REPLAY_ABS_TOL = 1e-12


def slack(x: float) -> float:
    """The gap below which two values near ``x`` count as equal: ``1e-9 * max(1, |x|)``."""
    return REL_TOL * max(1.0, abs(x))


def cap_with_slack(cap: float) -> float:
    """The largest memory level that still counts as within ``cap``: ``cap (1 + 1e-9) + 1e-12``."""
    return cap * (1 + REL_TOL) + CAP_ABS_TOL


def within_cap(level: float, cap: float) -> bool:
    """Whether a memory level respects ``cap``, up to float noise (an infinite cap admits anything)."""
    return level <= cap_with_slack(cap)

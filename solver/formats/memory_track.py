"""The memory-over-time track drawn under each device row of the Gantt chart.

Why: a bubble is either a dependency wait or a memory wait, and only the second one shows up
as live memory sitting at the cap while the device idles. The track is the device's live
activation memory as a step function, with the cap as a dashed line and the intervals spent at
the cap shaded, so a memory-bound bubble reads straight off the chart.

Memory follows the convention of :func:`pipesched.solver.core.metrics.peak_memory`: a positive
delta is held from its op's start, a negative one is released at its end, and ops of a device run
in :func:`~pipesched.solver.core.schedule.execution_key` order, so the level after the ``k``-th
event is ``sum(delta[:k])`` and the highest level is the reported ``peak_memory``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core.instance import Instance
from ..core.schedule import Schedule, ScheduledOp, execution_key
from ..core.tolerance import slack

MEMORY_HEIGHT = 16  # px of the track under each row
LIMIT_COLOUR = "#CC79A7"  # Okabe–Ito reddish purple: apart from F, B and W


@dataclass(frozen=True)
class Track:
    """One device's memory: ``steps`` of (time, level from then on), its peak and its cap."""

    steps: list[tuple[float, float]]
    peak: float
    limit: float  # math.inf when uncapped


def memory_tracks(schedule: Schedule) -> list[Track]:
    """Live memory of every device over time, in the order memory is checked by the validator."""
    problem = schedule.problem
    inst = Instance.from_problem(problem)
    per: list[list[ScheduledOp]] = [[] for _ in range(problem.devices)]
    for op in schedule.ops:
        if 0 <= op.device < problem.devices:
            per[op.device].append(op)
    tracks = []
    for d, ops in enumerate(per):
        level = peak = 0.0
        steps: list[tuple[float, float]] = [(0.0, 0.0)]
        for op in sorted(ops, key=execution_key):
            delta, surge = inst.mem(op.id), inst.surge(op.id)
            if surge > 0:  # a recompute transient: live from B's start to its end
                steps.append((op.start, level + max(delta, 0.0) + surge))
                peak = max(peak, steps[-1][1])
                level += delta
                steps.append((op.end, level))
                continue
            if delta == 0:
                continue
            level += delta
            steps.append((op.start if delta > 0 else op.end, level))
            peak = max(peak, level)
        tracks.append(Track(steps, peak, inst.memory_cap(d)))
    return tracks


def _at_cap(track: Track, horizon: float) -> list[tuple[float, float]]:
    """Maximal time intervals during which the level sits at (or above) the cap."""
    if math.isinf(track.limit):
        return []
    full = track.limit - slack(track.limit)
    out: list[tuple[float, float]] = []
    ends = [t for t, _ in track.steps[1:]] + [horizon]
    for (t, level), end in zip(track.steps, ends, strict=True):
        if level >= full and end > t:
            if out and out[-1][1] >= t:
                out[-1] = (out[-1][0], end)
            else:
                out.append((t, end))
    return out


def track_scale(tracks: list[Track]) -> tuple[float, float]:
    """(low, high) memory shown by every track: one scale for all devices, so rows compare."""
    low = min((lv for tr in tracks for _, lv in tr.steps), default=0.0)
    high = max([tr.peak for tr in tracks] + [tr.limit for tr in tracks if math.isfinite(tr.limit)] + [0.0])
    return min(0.0, low), high


def _n(x: float) -> str:
    """One decimal, no trailing zero: memory paths are most of a large chart's extra bytes."""
    s = f"{x:.1f}"
    s = s[:-2] if s.endswith(".0") else s
    return "0" if s == "-0" else s


def track_svg(track: Track, d: int, left: float, width: float, scale_t: float, y: float,
              memory_range: tuple[float, float], horizon: float, tooltip: str) -> list[str]:
    """SVG of one device's track: background, stepped area, at-cap shading, cap line, label."""
    low, high = memory_range
    span = high - low
    height = MEMORY_HEIGHT

    def yy(level: float) -> float:
        return height - (level - low) / span * height if span > 0 else float(height)

    base = yy(0.0)
    out = [f'<g id="memory-{d}" class="memory" transform="translate(0,{_n(y)})">',
           f"<title>{tooltip}</title>",
           f'<text class="mt" x="{left - 8}" y="{height / 2}">peak {track.peak:.4g}</text>',
           f'<rect x="{left}" width="{_n(width)}" height="{height}" class="mb"/>']
    path = [f"M{_n(left)},{_n(base)}"]
    x_now, y_now = round(left, 1), round(base, 1)
    for t, level in track.steps[1:]:
        x, yv = round(left + t * scale_t, 1), round(yy(level), 1)
        if x != x_now:
            path.append(f"H{_n(x)}")
            x_now = x
        if yv != y_now:
            path.append(f"V{_n(yv)}")
            y_now = yv
    path.append(f"H{_n(left + horizon * scale_t)}V{_n(base)}Z")
    out.append(f'<path class="ma" d="{"".join(path)}"/>')
    for a, b in _at_cap(track, horizon):  # over the area: at the cap the area fills the track
        out.append(f'<rect x="{_n(left + a * scale_t)}" width="{_n(max(0.5, (b - a) * scale_t))}" '
                   f'height="{height}" class="mc"/>')
    if math.isfinite(track.limit) and span > 0:
        ly = _n(yy(track.limit))
        out.append(f'<line class="ml" x1="{left}" x2="{_n(left + width)}" y1="{ly}" y2="{ly}"/>')
    out.append("</g>")
    return out


STYLE = (
    ".mb{fill:#f7f7f7}.mc{fill:#CC79A7;fill-opacity:0.45}.ma{fill:#c8c8c8;stroke:#666;stroke-width:0.8}"
    f".ml{{stroke:{LIMIT_COLOUR};stroke-width:1.5;stroke-dasharray:4 2}}"
    ".mt{font-size:9px;text-anchor:end;dominant-baseline:central;fill:#666}"
)

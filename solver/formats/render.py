"""Gantt chart of a schedule as plain SVG text (no dependencies, no browser needed).

One row per device, one ``<rect>`` per op, coloured by kind with the Okabe–Ito palette
(distinguishable under the common colour-vision deficiencies): F blue, B vermillion, W bluish
green. With ``v > 1`` model chunks are told apart by tint (chunk 0 full colour, later chunks
lighter; under ``placement: "dual"`` the two chunks are the two directions, so the downward stream
is full colour and the upward stream lighter, and tooltips say which; an overlapped F&B pair of
``costs.overlap_fb`` is one box, its F in the top half and its B in the bottom half). Idle time shows as the hatched row background. Under each row a thin track draws the
device's live memory over time with its limit as a dashed line and the time spent at the limit
shaded (:mod:`.memory_track`), so a bubble caused by the memory cap is told apart from one caused
by dependencies. Microbatch numbers are written in 11px inside boxes wide enough, in 8px on
narrower ones, and charts up to ``TOOLTIP_MAX_OPS`` ops carry a hover ``<title>`` per op.

The time axis and the memory figures carry the problem's ``units`` when it states them (a problem
made by ``pipesched plan`` or the cost model does); otherwise costs are "any time unit".

Size: a row is a ``<g>`` translated to its height, so each op is one short ``<rect>`` with an
``x``, a ``width`` and a class, roughly 60 bytes an op once tooltips and labels drop out, and
the memory track is one path of one-decimal steps (about 5 bytes an op).
"""

from __future__ import annotations

import math
from html import escape

from ..core.instance import Instance
from ..core.schedule import Schedule
from ..core.tolerance import slack
from ..timing.pairs import timed_pairs
from .memory_track import MEMORY_HEIGHT, memory_tracks, track_scale, track_svg
from .memory_track import STYLE as MEMORY_STYLE

#: Okabe & Ito (2008) colour-blind-safe colours for forward, backward (input) and weight ops.
KIND_COLOURS = {"F": "#0072B2", "B": "#D55E00", "W": "#009E73"}
KIND_NAMES = {"F": "F forward", "B": "B backward (input grad)", "W": "W backward (weight grad)"}
FUSED_NAME = "B backward (fused)"
#: The step's tail (costs.grad_sync, costs.optimizer): syncs in a thin lane under the row, the optimizer
#: step in the row (dark grey, unlike the memory track's colours, and Okabe & Ito's sky blue).
SYNC_COLOUR, OPTIMIZER_COLOUR = "#4D4D4D", "#56B4E9"
SYNC_HEIGHT = 6

ROW_HEIGHT = 22
ROW_GAP = 6
LEFT = 74  # room for the device labels
RIGHT = 24
TOP = 62  # title lines and legend
AXIS = 34  # tick labels under the rows
CHAR_WIDTH = 6.6  # of an 11px digit, to decide whether a label fits in a box
SMALL_CHAR_WIDTH = 4.8  # of an 8px digit, the fallback on narrow boxes
ROW_LABEL_CHAR_WIDTH = 5.4  # of a 9px character, to size the margin for row labels
TOOLTIP_MAX_OPS = 4000  # above this, per-op <title> would bloat the file


def _mix_white(colour: str, amount: float) -> str:
    """``colour`` moved ``amount`` (0..1) of the way to white."""
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return "#" + "".join(f"{round(c + (255 - c) * amount):02x}" for c in (r, g, b))


def _chunk(stage: int, devices: int) -> int:
    """Model chunk of a stage: which of the device's v stages it is (same for loop and V)."""
    return stage // devices


def _tint(chunk: int, chunks: int) -> float:
    return 0.0 if chunks <= 1 else 0.55 * chunk / (chunks - 1)


def _fmt(x: float) -> str:
    """Short number for coordinates and figures: at most 2 decimals, no trailing zeros."""
    s = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if s == "-0" else s


def _figure(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.6g}"


def nice_step(span: float, target_ticks: int = 10) -> float:
    """A 1, 2 or 5 × 10^k tick step giving about ``target_ticks`` ticks over ``span``."""
    if span <= 0:
        return 1.0
    raw = span / target_ticks
    base = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * base:
            return factor * base
    return 10 * base


def title_lines(schedule: Schedule) -> tuple[str, str]:
    """The two header lines: the figures, then the problem in short."""
    p = schedule.problem
    bubble = "–" if schedule.bubble_ratio is None else f"{schedule.bubble_ratio:.1%}"
    parts = [schedule.method, schedule.status]
    if schedule.ops and schedule.pipeline_end is not None:
        parts += [f"step {_figure(schedule.step_end)} (pipeline {_figure(schedule.pipeline_end)})",
                  f"objective ({p.objective}) {_figure(schedule.objective_value)}"]
    elif schedule.ops:
        parts += [f"makespan {_figure(schedule.makespan)}",
                  f"objective ({p.objective}) {_figure(schedule.objective_value)}"]
    else:
        parts.append(f"objective {p.objective}")
    if schedule.lower_bound is not None:
        parts.append(f"lower bound {_figure(schedule.lower_bound)}")
    if schedule.ops:
        parts.append(f"bubble {bubble}")
    first = " · ".join(parts)
    second = (
        f"p={p.devices} devices · m={p.microbatches} microbatches · v={p.stages_per_device} "
        f"({p.placement} placement) · {'split' if p.split_backward else 'fused'} backward · "
        f"comm {_figure(p.costs.comm) if not isinstance(p.costs.comm, list) else 'per boundary'}"
    )
    if p.placement == "dual":
        second += f" · full colour = down (microbatches 0..{p.down_microbatches - 1}), lighter = up"
    elif p.stages_per_device > 1:
        second += f" · lighter = later model chunk (0..{p.stages_per_device - 1})"
    return first, second


def _style(kinds: list[str], chunks: int, stroke: bool) -> str:
    rules = [
        "text{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;fill:#222}",
        ".t{font-size:14px;font-weight:bold}.s{font-size:12px;fill:#444}",
        ".d{font-size:12px;text-anchor:end;dominant-baseline:central}.rl{font-size:9px;fill:#555}",
        ".k{font-size:10px;text-anchor:middle;fill:#555}.g{stroke:#d8d8d8;stroke-width:1}",
        ".n{font-size:11px;text-anchor:middle;dominant-baseline:central;fill:#fff;pointer-events:none}",
        ".l{font-size:12px;dominant-baseline:central}.n.dk{fill:#222}.n.sm{font-size:8px}",
    ]
    rules.append(f".sy{{fill:{SYNC_COLOUR};stroke:#fff;stroke-width:0.4}}.op{{fill:{OPTIMIZER_COLOUR}}}")
    if stroke:
        rules.append("rect.o{stroke:#fff;stroke-width:0.6}")
    for k in kinds:
        for c in range(chunks):
            rules.append(f".{k}{c}{{fill:{_mix_white(KIND_COLOURS[k], _tint(c, chunks))}}}")
    return "".join(rules)


def _legend(kinds: list[str], fused: bool, chunks: int, y: float, memory: bool, x: float = LEFT,
            tail: bool = False) -> list[str]:
    out: list[str] = []
    if tail:
        for cls, name in (("sy", "gradient sync"), ("op", "optimizer step")):
            out.append(f'<rect x="{x}" y="{y - 6}" width="18" height="12" class="{cls}"/>')
            out.append(f'<text class="l" x="{x + 23}" y="{y}">{name}</text>')
            x += 31 + len(name) * 6.6
    for k in kinds:
        name = FUSED_NAME if (fused and k == "B") else KIND_NAMES[k]
        for c in range(chunks):
            out.append(f'<rect x="{x + 12 * c}" y="{y - 6}" width="12" height="12" class="{k}{c}"/>')
        x += 12 * chunks + 5
        out.append(f'<text class="l" x="{x}" y="{y}">{escape(name)}</text>')
        x += 8 + len(name) * 6.6
    out.append(f'<rect x="{x}" y="{y - 6}" width="18" height="12" fill="url(#idle)" stroke="#bbb"/>')
    out.append(f'<text class="l" x="{x + 23}" y="{y}">idle</text>')
    x += 60
    if memory:
        out.append(f'<rect x="{x}" y="{y - 6}" width="18" height="12" class="ma"/>')
        out.append(f'<text class="l" x="{x + 23}" y="{y}">memory</text>')
        x += 80
        out.append(f'<line class="ml" x1="{x}" x2="{x + 18}" y1="{y}" y2="{y}"/>')
        out.append(f'<text class="l" x="{x + 23}" y="{y}">limit</text>')
        x += 62
        out.append(f'<rect x="{x}" y="{y - 6}" width="18" height="12" class="mc"/>')
        out.append(f'<text class="l" x="{x + 23}" y="{y}">at the limit</text>')
    return out


def _tail_rects(schedule: Schedule, d: int, left: float, scale: float) -> list[str]:
    """Device ``d``'s syncs in the lane under its row and its optimizer step in the row."""
    out = []
    for x in schedule.syncs or []:
        if x.device == d and x.end > x.start:
            out.append(f'<rect x="{_fmt(left + x.start * scale)}" y="{ROW_HEIGHT + 1}" '
                       f'width="{_fmt((x.end - x.start) * scale)}" height="{SYNC_HEIGHT}" class="sy">'
                       f"<title>gradient sync of stage {x.stage} · {x.start:g}–{x.end:g}</title></rect>")
    for x in schedule.optimizer_steps or []:
        if x.device == d and x.end > x.start:
            out.append(f'<rect x="{_fmt(left + x.start * scale)}" width="{_fmt((x.end - x.start) * scale)}" '
                       f'height="{ROW_HEIGHT}" class="op"><title>optimizer step · {x.start:g}–{x.end:g}</title></rect>')
    return out


def _wrap(text: str, chars: int) -> list[str]:
    """``text`` cut at spaces into lines of at most ``chars`` characters (longer words stay whole)."""
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= chars:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def _label(text: str, x: float, w: float, dark: bool, y: float = ROW_HEIGHT / 2) -> str | None:
    """A microbatch number centred in its box: 11px when it fits, 8px on narrow boxes, else none
    (the op's tooltip still names it)."""
    for cls, char_w in (("n", CHAR_WIDTH), ("n sm", SMALL_CHAR_WIDTH)):
        if w >= char_w * len(text) + 2:
            cls += " dk" if dark else ""
            return f'<text class="{cls}" x="{_fmt(x + w / 2)}" y="{_fmt(y)}">{text}</text>'
    return None


def render_svg(schedule: Schedule, row_labels: list[str] | None = None) -> str:
    """The schedule as a standalone SVG document (UTF-8 text).

    ``row_labels`` (one per device, optional) adds a second line under each device name, e.g. the
    layers a plan puts on it; the left margin grows to fit the longest."""
    problem = schedule.problem
    devices = problem.devices
    kinds = ["F", "B", "W"] if problem.split_backward else ["F", "B"]
    chunks = problem.stages_per_device
    dual = problem.placement == "dual"
    tail = schedule.syncs is not None and bool(schedule.ops)
    horizon = max([o.end for o in schedule.ops] + [schedule.step_end or 0.0], default=0.0)
    tracks = memory_tracks(schedule) if schedule.ops else []
    memory_range = track_scale(tracks)
    show_memory = memory_range[1] > memory_range[0]
    lane = SYNC_HEIGHT + 2 if tail else 0
    pitch = ROW_HEIGHT + ROW_GAP + lane + (MEMORY_HEIGHT + 2 if show_memory else 0)
    per_device = max(1, len(schedule.ops) // max(1, devices))
    chart_w = min(2400.0, max(900.0, 14.0 * per_device))
    rows_h = devices * pitch
    left = LEFT if not row_labels else max(LEFT, math.ceil(14 + ROW_LABEL_CHAR_WIDTH * max(map(len, row_labels))))
    width = left + chart_w + RIGHT
    head, sub = title_lines(schedule)
    reason_lines = _wrap(f"No schedule ({schedule.status}): {schedule.reason or 'no ops'}", int(chart_w / 6.6))
    height = TOP + rows_h + AXIS + 8 if schedule.ops else TOP + 20 + 16 * len(reason_lines)
    scale = chart_w / horizon if horizon > 0 else 0.0
    widest = max(((o.end - o.start) * scale for o in schedule.ops), default=0.0)
    narrowest = min(((o.end - o.start) * scale for o in schedule.ops), default=0.0)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_fmt(width)}" height="{_fmt(height)}" '
        f'viewBox="0 0 {_fmt(width)} {_fmt(height)}">',
        f"<title>{escape(head)}</title>",
        "<defs><pattern id=\"idle\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
        "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f4f4f4\"/>"
        "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#d0d0d0\" stroke-width=\"2\"/></pattern></defs>",
        f"<style>{_style(kinds, chunks, stroke=narrowest >= 3.0 or widest >= 6.0)}{MEMORY_STYLE}</style>",
        '<rect width="100%" height="100%" fill="#fff"/>',
        f'<text class="t" x="{left}" y="18">{escape(head)}</text>',
        f'<text class="s" x="{left}" y="35">{escape(sub)}</text>',
        *_legend(kinds, not problem.split_backward, chunks, 52, show_memory, left, tail),
    ]

    if not schedule.ops:
        for i, line in enumerate(reason_lines):
            out.append(f'<text class="s" x="{left}" y="{TOP + 20 + 16 * i}">{escape(line)}</text>')
        out.append("</svg>")
        return "\n".join(out) + "\n"

    # time axis: grid lines behind the rows, tick labels below them
    step = nice_step(horizon)
    axis_y = TOP + rows_h
    ticks = []
    t = 0.0
    while t <= horizon + slack(horizon):
        x = left + t * scale
        ticks.append(f'<line class="g" x1="{_fmt(x)}" y1="{TOP - 2}" x2="{_fmt(x)}" y2="{axis_y + 3}"/>')
        ticks.append(f'<text class="k" x="{_fmt(x)}" y="{axis_y + 15}">{_fmt(t) if step < 1 else f"{t:g}"}</text>')
        t = round(t + step, 12)
    out.append(f'<g id="axis">{"".join(ticks)}</g>')
    time_unit = problem.units.time if problem.units and problem.units.time else None
    axis_label = f"time ({time_unit})" if time_unit else "time"
    out.append(f'<text class="k" x="{_fmt(left + chart_w / 2)}" y="{axis_y + 30}">{escape(axis_label)}</text>')

    tooltips = len(schedule.ops) <= TOOLTIP_MAX_OPS
    # overlapped F&B pairs (costs.overlap_fb) share one box: F in its top half, B in its bottom half
    pairs = timed_pairs(schedule.ops, Instance.from_problem(problem)) if problem.costs.overlap_fb is not None else {}
    rows: list[list[str]] = [[] for _ in range(devices)]
    labels: list[list[str]] = [[] for _ in range(devices)]
    for o in schedule.ops:
        if not 0 <= o.device < devices:
            continue  # a hand-edited file; `pipesched validate` reports it
        x = left + o.start * scale
        w = (o.end - o.start) * scale
        cls = f"o {o.kind}{_chunk(o.stage, devices)}"
        paired = o.id in pairs
        half = ROW_HEIGHT / 2
        top = half if paired and o.kind == "B" else 0.0
        shape = f'y="{_fmt(top)}" height="{_fmt(half)}"' if paired else f'height="{ROW_HEIGHT}"'
        rect = f'<rect x="{_fmt(x)}" width="{_fmt(w)}" {shape} class="{cls}"'
        if tooltips:
            way = (" down" if o.stage < devices else " up") if dual else ""
            both = f" · overlapped with {pairs[o.id]}" if paired else ""
            tip = (f"{o.kind}{o.microbatch} · microbatch {o.microbatch}{way} · stage {o.stage} · "
                   f"{o.start:g}–{o.end:g}{both}")
            rect += f"><title>{tip}</title></rect>"
        else:
            rect += "/>"
        rows[o.device].append(rect)
        label = _label(str(o.microbatch), x, w, _tint(_chunk(o.stage, devices), chunks) > 0.3,
                       top + half / 2 if paired else half)
        if label:
            labels[o.device].append(label)
    for d in range(devices):
        y = TOP + d * pitch
        out.append(f'<g id="device-{d}" class="device" transform="translate(0,{y})">')
        label = row_labels[d] if row_labels and d < len(row_labels) else ""
        out.append(f'<text class="d" x="{left - 8}" y="{ROW_HEIGHT / 2 - (5 if label else 0)}">device {d}</text>')
        if label:
            out.append(f'<text class="d rl" x="{left - 8}" y="{ROW_HEIGHT / 2 + 7}">{escape(label)}</text>')
        out.append(f'<rect x="{left}" width="{_fmt(chart_w)}" height="{ROW_HEIGHT}" fill="url(#idle)"/>')
        out.extend(rows[d])
        out.extend(labels[d])
        if tail:
            out.extend(_tail_rects(schedule, d, left, scale))
        out.append("</g>")
        if show_memory:
            tr = tracks[d]
            mem_unit = f" {problem.units.memory}" if problem.units and problem.units.memory else ""
            cap = "none" if math.isinf(tr.limit) else f"{tr.limit:g}{mem_unit}"
            tip = f"device {d} memory: peak {tr.peak:g}{mem_unit}, limit {cap}; shaded where it sits at the limit"
            out.extend(track_svg(tr, d, left, chart_w, scale, y + ROW_HEIGHT + 2 + lane, memory_range,
                                 horizon, escape(tip)))
    out.append("</svg>")
    return "\n".join(out) + "\n"

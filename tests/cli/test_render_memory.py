"""The Gantt chart explains memory (issue 13, item 10): a memory track under every device row,
the cap as a line, the time spent at the cap shaded; labels that stay legible on narrow boxes.

The track is checked against a brute-force level computed from the ops alone (positive deltas held
from the op's start, negative ones released at its end), not against the renderer's own numbers.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from hypothesis import given, reject, settings
from hypothesis import strategies as st

from pipesched.solver import Problem, solve
from pipesched.solver.core.instance import Instance
from pipesched.solver.core.schedule import Schedule
from pipesched.solver.formats.memory_track import MEMORY_HEIGHT, memory_tracks
from pipesched.solver.formats.render import LEFT, ROW_HEIGHT, SMALL_CHAR_WIDTH, render_svg
from pipesched.solver.timing.finalize import no_schedule

NS = "{http://www.w3.org/2000/svg}"


def _level(schedule: Schedule, device: int, t: float) -> float:
    """Live memory on ``device`` at time ``t`` (not at an event time), from the ops alone."""
    inst = Instance.from_problem(schedule.problem)
    total = 0.0
    for o in schedule.ops:
        if o.device != device:
            continue
        delta = inst.mem(o.id)
        if (delta > 0 and o.start < t) or (delta < 0 and o.end < t):
            total += delta
    return total


def _group(root: ET.Element, gid: str) -> ET.Element:
    return next(g for g in root.iter(NS + "g") if g.get("id") == gid)


def _scale(svg: str) -> tuple[float, float]:
    """(x of time 0, px per time unit) read off the first and last axis ticks."""
    axis = _group(ET.fromstring(svg), "axis")
    ticks = [(float(t.text or "0"), float(t.get("x") or 0)) for t in axis.iter(NS + "text")]
    (t0, x0), (t1, x1) = ticks[0], ticks[-1]
    return x0, (x1 - x0) / (t1 - t0)


@settings(max_examples=25, deadline=None)
@given(p=st.integers(1, 4), m=st.integers(1, 6), v=st.sampled_from([1, 2]),
       limit=st.sampled_from([None, 2.0, 3.0, 5.0]), fused=st.booleans())
def test_the_track_follows_live_memory_and_peaks_at_the_reported_peak(
        p: int, m: int, v: int, limit: float | None, fused: bool) -> None:
    problem = Problem(devices=p, microbatches=m, stages_per_device=v, split_backward=not fused,
                      memory={"limit": limit}, costs={"forward": 1.0, "backward_input": 1.5, "backward_weight": 0.5})
    schedule = solve(problem, "greedy")
    if not schedule.ops:  # a cap under one microbatch's memory: greedy proves it, there is no track to draw
        assert schedule.status == "infeasible"
        reject()
    for d, track in enumerate(memory_tracks(schedule)):
        assert abs(track.peak - schedule.peak_memory[d]) <= 1e-9
        times = sorted({t for t, _ in track.steps} | {max(o.end for o in schedule.ops)})
        for a, b in zip(times, times[1:], strict=False):
            mid = (a + b) / 2
            level = next(lv for t, lv in reversed(track.steps) if t <= mid)
            assert abs(level - _level(schedule, d, mid)) <= 1e-9, (d, mid)


def test_every_device_row_has_a_memory_track_with_its_limit_line() -> None:
    schedule = solve(Problem(devices=3, microbatches=6, memory={"limit": [4, 3, 2]}), "greedy")
    root = ET.fromstring(render_svg(schedule))
    limit_ys = []
    for d in range(3):
        track = _group(root, f"memory-{d}")
        assert f"limit {[4, 3, 2][d]}" in (track.find(NS + "title").text or "")
        (line,) = [e for e in track.iter(NS + "line") if e.get("class") == "ml"]
        limit_ys.append(float(line.get("y1") or 0))
        assert 0 <= limit_ys[-1] <= MEMORY_HEIGHT
        assert len([e for e in track.iter(NS + "path") if e.get("class") == "ma"]) == 1
    assert limit_ys[0] < limit_ys[1] < limit_ys[2], "one scale for all rows: a lower cap sits lower"


def test_a_track_without_a_limit_has_no_limit_line() -> None:
    root = ET.fromstring(render_svg(solve(Problem(devices=2, microbatches=3), "1f1b")))
    track = _group(root, "memory-0")
    assert [e for e in track.iter(NS + "line") if e.get("class") == "ml"] == []


def test_a_memory_bound_bubble_is_shaded_as_time_at_the_limit() -> None:
    # The first device may hold one microbatch: after F0 it idles until W0 frees it, at its cap.
    schedule = solve(Problem(devices=2, microbatches=3, memory={"limit": [1, 2]}), "greedy")
    svg = render_svg(schedule)
    x0, px = _scale(svg)
    shaded = [((float(r.get("x") or 0) - x0) / px, (float(r.get("x") or 0) + float(r.get("width") or 0) - x0) / px)
              for r in _group(ET.fromstring(svg), "memory-0").iter(NS + "rect") if r.get("class") == "mc"]
    ops = sorted((o.start, o.end) for o in schedule.ops if o.device == 0)
    idle = [(a[1], b[0]) for a, b in zip(ops, ops[1:], strict=False) if b[0] - a[1] > 1e-9]
    assert idle, "the cap should force device 0 to wait"
    for a, b in idle:
        assert _level(schedule, 0, (a + b) / 2) == 1.0
        assert any(s <= a + 0.05 and b - 0.05 <= e for s, e in shaded), f"idle {a}-{b} not shaded: {shaded}"
    for s, e in shaded:  # and nothing below the cap is shaded
        assert _level(schedule, 0, (s + e) / 2) == 1.0


def test_problems_without_memory_draw_no_track() -> None:
    problem = Problem(devices=2, microbatches=2, memory={"forward": 0, "backward_input": 0, "backward_weight": 0})
    root = ET.fromstring(render_svg(solve(problem, "1f1b")))
    assert [g for g in root.iter(NS + "g") if g.get("class") == "memory"] == []


def test_every_label_fits_its_box_and_narrow_boxes_get_small_labels_or_a_tooltip() -> None:
    schedule = solve(Problem(devices=2, microbatches=40, costs={"forward": 1, "backward_input": 1,
                                                                 "backward_weight": 0.4}), "1f1b")
    svg = render_svg(schedule)
    root = ET.fromstring(svg)
    small = 0
    for d in range(2):
        row = _group(root, f"device-{d}")
        boxes = [r for r in row.iter(NS + "rect") if "o" in (r.get("class") or "").split()]
        for box in boxes:  # every op names its kind and microbatch on hover
            tip = box.find(NS + "title")
            assert tip is not None and re.match(r"[FBW]\d+ · microbatch \d+ · stage \d+", tip.text or "")
        for label in (t for t in row.iter(NS + "text") if (t.get("class") or "").startswith("n")):
            x = float(label.get("x") or 0)
            box = next(b for b in boxes if float(b.get("x") or 0) <= x <= float(b.get("x") or 0) + float(b.get("width") or 0))
            width = float(box.get("width") or 0)
            char = SMALL_CHAR_WIDTH if "sm" in (label.get("class") or "").split() else 6.6
            assert char * len(label.text or "") <= width, (label.text, width)
            small += "sm" in (label.get("class") or "").split()
    assert small > 0, "the narrow W boxes should carry 8px labels"


def test_the_reason_of_an_empty_schedule_wraps_inside_the_chart() -> None:
    reason = "memory.limit 0.5 is below what one microbatch needs on device 0 " * 6
    svg = render_svg(no_schedule(Problem(devices=2, microbatches=2, memory={"limit": 0.5}), "cpsat", "infeasible", reason))
    root = ET.fromstring(svg)
    width = float(root.get("width") or 0)
    lines = [t.text or "" for t in root.iter(NS + "text") if float(t.get("y") or 0) > 62]
    assert len(lines) > 1 and " ".join(lines).split() == f"No schedule (infeasible): {reason}".split()
    assert all(LEFT + 6.6 * len(line) <= width for line in lines)
    assert float(root.get("height") or 0) >= 62 + 16 * len(lines)


def test_rows_and_tracks_do_not_overlap() -> None:
    root = ET.fromstring(render_svg(solve(Problem(devices=3, microbatches=4), "1f1b")))
    spans = []
    for d in range(3):
        for gid, h in ((f"device-{d}", ROW_HEIGHT), (f"memory-{d}", MEMORY_HEIGHT)):
            y = float(re.search(r"translate\(0,([\d.]+)\)", _group(root, gid).get("transform") or "").group(1))
            spans.append((y, y + h))
    spans.sort()
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))

"""The SVG Gantt chart: well-formed XML, one row per device, one rect per op, legend and title."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from pipesched.cli import main
from pipesched.solver import Problem, solve
from pipesched.solver.core.io import dump_json
from pipesched.solver.formats.render import nice_step, render_svg
from pipesched.solver.timing.finalize import no_schedule

NS = "{http://www.w3.org/2000/svg}"


def _rows(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iter(NS + "g") if g.get("class") == "device"]


def test_chart_has_one_row_per_device_and_one_rect_per_op() -> None:
    schedule = solve(Problem(devices=4, microbatches=6, costs={"comm": 0.25}), "zb-h1")
    root = ET.fromstring(render_svg(schedule))
    rows = _rows(root)
    assert [g.get("id") for g in rows] == [f"device-{d}" for d in range(4)]
    for d, g in enumerate(rows):
        op_rects = [r for r in g.iter(NS + "rect") if "o" in (r.get("class") or "").split()]
        assert len(op_rects) == sum(1 for o in schedule.ops if o.device == d)
        assert {r.get("class").split()[1][0] for r in op_rects} == {"F", "B", "W"}


def test_title_and_legend_carry_the_figures_and_the_kinds() -> None:
    schedule = solve(Problem(devices=2, microbatches=3), "gpipe")
    svg = render_svg(schedule)
    texts = [t.text or "" for t in ET.fromstring(svg).iter(NS + "text")]
    title = texts[0]
    for word in ("gpipe", "makespan", "lower bound", "bubble", "objective"):
        assert word in title
    assert any("F forward" in t for t in texts) and any("W backward" in t for t in texts)
    assert any(t == "idle" for t in texts)
    assert any(t == "time" for t in texts)


def test_microbatch_numbers_are_written_in_boxes_wide_enough() -> None:
    schedule = solve(Problem(devices=2, microbatches=3), "gpipe")
    labels = [t.text for t in ET.fromstring(render_svg(schedule)).iter(NS + "text") if t.get("class", "").startswith("n")]
    assert sorted(labels) == sorted(str(o.microbatch) for o in schedule.ops)


def test_chunks_get_their_own_shade_when_devices_hold_several_stages() -> None:
    schedule = solve(Problem(devices=2, microbatches=4, stages_per_device=2), "gpipe")
    classes = {r.get("class") for r in ET.fromstring(render_svg(schedule)).iter(NS + "rect")}
    assert {"o F0", "o F1", "o B0", "o B1"} <= classes


def test_large_schedules_stay_compact() -> None:
    schedule = solve(Problem(devices=32, microbatches=256), "gpipe")
    svg = render_svg(schedule)
    assert len(schedule.ops) == 24576
    assert len(svg) < 80 * len(schedule.ops)  # no per-op tooltips or labels when they cannot be read
    assert svg.count("<rect") >= len(schedule.ops)


def test_a_schedule_without_ops_renders_its_reason() -> None:
    problem = Problem(devices=2, microbatches=2, memory={"limit": 0.5})
    svg = render_svg(no_schedule(problem, "cpsat", "infeasible", "memory.limit 0.5 is below one forward's 1"))
    root = ET.fromstring(svg)
    assert "memory.limit 0.5" in svg and _rows(root) == []


def test_tick_steps_are_round_numbers() -> None:
    assert nice_step(27) == 5 and nice_step(830) == 100 and nice_step(0.9) == 0.1


def test_render_command_writes_the_svg(tmp_path: Path) -> None:
    schedule_file, svg_file = tmp_path / "s.json", tmp_path / "g.svg"
    schedule_file.write_text(dump_json(solve(Problem(devices=3, microbatches=3), "1f1b")))
    assert main(["render", str(schedule_file), "-o", str(svg_file)]) == 0
    assert len(_rows(ET.fromstring(svg_file.read_text()))) == 3

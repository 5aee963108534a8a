"""The Gantt chart of a plan labels each device's row with the layers the plan puts on it."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from planning_models import small_model

from pipesched.cli import main
from pipesched.solver import Problem, solve
from pipesched.solver.formats.render import LEFT, render_svg
from pipesched.solver.planning import Cluster, Plan, PlanStage
from pipesched.solver.planning.labels import device_labels

NS = "{http://www.w3.org/2000/svg}"


def _row_texts(svg: str) -> dict[str, list[str]]:
    root = ET.fromstring(svg)
    return {g.get("id"): [t.text for t in g.iter(NS + "text") if "d" in (t.get("class") or "").split()]
            for g in root.iter(NS + "g") if g.get("class") == "device"}


def test_row_labels_go_under_each_device_name_and_widen_the_margin() -> None:
    schedule = solve(Problem(devices=2, microbatches=3), "gpipe")
    plain = render_svg(schedule)
    labelled = render_svg(schedule, ["layers 0–8 rc, 25–33", "layers 9–24"])
    assert _row_texts(labelled) == {"device-0": ["device 0", "layers 0–8 rc, 25–33"],
                                    "device-1": ["device 1", "layers 9–24"]}
    assert _row_texts(plain) == {"device-0": ["device 0"], "device-1": ["device 1"]}
    width = float(ET.fromstring(labelled).get("width"))
    assert width > float(ET.fromstring(plain).get("width"))  # the margin grew to hold the longest label
    assert width - float(ET.fromstring(plain).get("width")) >= 5 * len("layers 0–8 rc, 25–33") + 14 - LEFT


def test_device_labels_list_each_devices_stages_in_model_order_with_recompute() -> None:
    cluster = Cluster(devices=2, stages_per_device=2, placement="v", microbatches=4)
    stages = [PlanStage(stage=0, device=0, layers=(0, 3), recompute=True), PlanStage(stage=1, device=1, layers=(3, 4)),
              PlanStage(stage=2, device=1, layers=(4, 5)), PlanStage(stage=3, device=0, layers=(5, 6))]
    plan = Plan(model=small_model(4), cluster=cluster, method="auto", status="feasible", stages=stages)
    assert device_labels(plan) == ["layers 0–2 rc, 5", "layers 3, 4"]


def test_plan_svg_shows_the_split_in_the_row_labels(tmp_path: Path) -> None:
    model, cluster, out, svg = (tmp_path / n for n in ("model.json", "cluster.json", "plan.json", "plan.svg"))
    model.write_text(small_model(4).model_dump_json())
    cluster.write_text(json.dumps({"devices": 2, "microbatches": 4, "memory_per_device": 40.0}))
    assert main(["plan", str(model), "--cluster", str(cluster), "--method", "greedy", "--time-limit", "1",
                 "-o", str(out), "--svg", str(svg)]) == 0
    plan = Plan.model_validate_json(out.read_text())
    rows = _row_texts(svg.read_text())
    for st in plan.stages:
        a, b = st.layers[0], st.layers[1] - 1
        assert (f"{a}" if a == b else f"{a}–{b}") in rows[f"device-{st.device}"][1]

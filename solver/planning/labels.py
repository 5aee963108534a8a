"""The Gantt chart's row labels of a plan: which layers each device holds (issue 10, "Render").

Device ``d``'s label lists its stages in model order as inclusive layer ranges of the expanded
model, ``rc`` marking a recomputed stage (``rc 3`` when only 3 of its layers are), e.g.
``layers 0–8 rc, 25–33`` (v = 2: two stages).
"""

from __future__ import annotations

from .plan import Plan, PlanStage


def _span(st: PlanStage) -> str:
    a, b = st.layers[0], st.layers[1] - 1
    rc = "" if not st.recompute else " rc" if st.recompute_layers is None else f" rc {len(st.recompute_layers)}"
    return (f"{a}" if a == b else f"{a}–{b}") + rc


def device_labels(plan: Plan) -> list[str]:
    """One label per device (empty when the plan has no split)."""
    if not plan.stages:
        return []
    mine: list[list[PlanStage]] = [[] for _ in range(plan.cluster.devices)]
    for st in sorted(plan.stages, key=lambda st: st.stage):
        mine[st.device].append(st)
    return ["layers " + ", ".join(_span(st) for st in stages) if stages else "" for stages in mine]

"""The cache key is derived from the Problem's own fields: changing any field of any problem changes its
key, unless the field is excluded on purpose (:data:`pipesched.solver.core.canonical.EXCLUDED`).

The fields are enumerated from the model itself, so a field added to :class:`Problem` (or to its costs
or memory) is checked without editing this file, except to say how to change it (:func:`_changed`):
a field with no rule fails :func:`test_every_field_has_a_change_rule`.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from pipesched.solver import Problem
from pipesched.solver.core.canonical import EXCLUDED, problem_key


def _leaf_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    out = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        nested = info.annotation if isinstance(info.annotation, type) else None
        if nested is None:  # Optional[Model]: look through the union
            args = [a for a in getattr(info.annotation, "__args__", ()) if isinstance(a, type)]
            nested = next((a for a in args if issubclass(a, BaseModel)), None)
        if nested is not None and issubclass(nested, BaseModel):
            out += _leaf_paths(nested, f"{path}.")
        else:
            out.append(path)
    return out


FIELDS = _leaf_paths(Problem)


def _excluded(path: str) -> bool:
    return any(path == e or path.startswith(e + ".") for e in EXCLUDED)


def _bump(value: Any, by: float = 1.0) -> Any:
    """A per-stage number (or list) with its first entry moved by ``by``."""
    if isinstance(value, list):
        return [value[0] + by, *value[1:]]
    return value + by


def _changed(data: dict[str, Any], path: str) -> dict[str, Any] | None:
    """``data`` with the field at ``path`` given another meaning (None: no valid change for this problem)."""
    d = copy.deepcopy(data)
    costs, memory = d.setdefault("costs", {}), d.setdefault("memory", {})
    p, v, m = d["devices"], d.get("stages_per_device", 1), d["microbatches"]
    placement = d.get("placement", "loop")
    if path == "devices":
        d["devices"] = p + (2 if placement == "dual" else 1)
    elif path == "microbatches":
        d["microbatches"] = m + 1
    elif path == "stages_per_device":
        if placement != "loop":
            return None
        d["stages_per_device"] = v + 1
    elif path == "placement":
        if v != 2:
            return None
        d["placement"] = "loop" if placement != "loop" else "v"
        d.pop("dual_split", None)
    elif path == "dual_split":
        if placement != "dual":
            return None
        split = d.get("dual_split", m // 2)
        d["dual_split"] = split + 1 if split < m else split - 1
    elif path == "split_backward":
        d["split_backward"] = not d.get("split_backward", True)
    elif path == "objective":
        d["objective"] = "stage_span" if d.get("objective", "makespan") == "makespan" else "makespan"
    elif path in ("costs.forward", "costs.backward_input", "costs.backward_weight"):
        field = path.split(".")[1]
        costs[field] = _bump(costs.get(field, 1.0))
    elif path == "costs.comm":
        costs["comm"] = _bump(costs.get("comm", 0.0), 0.5)
    elif path == "costs.grad_sync":
        costs["grad_sync"] = _bump(costs.get("grad_sync", 0.0), 2.0)
    elif path == "costs.optimizer":
        costs["optimizer"] = _bump(costs.get("optimizer", 0.0), 1.5)
    elif path == "costs.overlap_fb":
        current = costs.get("overlap_fb")
        costs["overlap_fb"] = 0.5 if current is None else _bump(current, -0.25)
    elif path in ("memory.forward", "memory.backward_input", "memory.backward_weight"):
        field = path.split(".")[1]
        defaults = {"forward": 1.0, "backward_input": 0.0, "backward_weight": -1.0}
        other = "backward_weight" if field == "forward" else "forward"  # keep the stage's deltas summing to 0
        memory[field] = _bump(memory.get(field, defaults[field]), 0.5)
        memory[other] = _bump(memory.get(other, defaults[other]), -0.5)
    elif path == "memory.backward_input_transient":
        memory["backward_input_transient"] = _bump(memory.get("backward_input_transient", 0.0), 0.5)
    elif path == "memory.limit":
        limit = memory.get("limit")
        memory["limit"] = 100.0 if limit is None else _bump(limit, 1.0)
    else:
        raise KeyError(path)
    return d


def _valid(data: dict[str, Any]) -> Problem | None:
    try:
        return Problem.model_validate(data)
    except ValidationError:
        return None


BASE = {"devices": 4, "microbatches": 8, "stages_per_device": 2, "placement": "dual",
        "costs": {"overlap_fb": 0.7}, "memory": {"limit": 6}}


def test_every_field_has_a_change_rule() -> None:
    """A new field needs a line in :func:`_changed`; then the property below covers it."""
    missing = []
    for path in FIELDS:
        if _excluded(path):
            continue
        try:
            _changed(BASE, path)
        except KeyError:
            missing.append(path)
    assert not missing, f"say how to change these fields in _changed: {missing}"
    assert {"devices", "costs.forward", "memory.limit", "costs.overlap_fb", "dual_split"} <= set(FIELDS)


@pytest.mark.parametrize("base", [BASE, {"devices": 3, "microbatches": 5},
                                  {"devices": 2, "microbatches": 4, "stages_per_device": 2, "placement": "v",
                                   "split_backward": False}])
def test_every_field_moves_the_key_of_a_fixed_problem(base: dict[str, Any]) -> None:
    key = problem_key(Problem.model_validate(base))
    moved = set()
    for path in FIELDS:
        if _excluded(path) or (changed := _changed(base, path)) is None or (problem := _valid(changed)) is None:
            continue
        assert problem_key(problem) != key, path
        moved.add(path)
    assert {"devices", "microbatches", "costs.forward", "memory.forward", "memory.limit"} <= moved


def test_every_field_is_moved_on_some_fixed_problem() -> None:
    """Together the fixed problems exercise every field that is not excluded (no field goes untested)."""
    bases = [BASE, {"devices": 3, "microbatches": 5},
             {"devices": 2, "microbatches": 4, "stages_per_device": 2, "placement": "v"}]
    untested = {p for p in FIELDS if not _excluded(p)}
    for base in bases:
        untested -= {p for p in untested if (c := _changed(base, p)) is not None and _valid(c) is not None}
    assert not untested


def test_an_excluded_field_does_not_move_the_key() -> None:
    assert "units" in EXCLUDED and EXCLUDED["units"]
    a = Problem(devices=2, microbatches=4)
    b = Problem(devices=2, microbatches=4, units={"time": "ms", "memory": "GiB"})
    assert problem_key(a) == problem_key(b)


@st.composite
def problems(draw: st.DrawFn) -> dict[str, Any]:
    placement = draw(st.sampled_from(["loop", "v", "dual"]))
    v = 2 if placement != "loop" else draw(st.integers(1, 3))
    p = draw(st.sampled_from([2, 4])) if placement == "dual" else draw(st.integers(1, 4))
    m = draw(st.integers(2, 6))
    stages = p if placement == "dual" else p * v
    number = st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.25])
    per_stage = st.one_of(number, st.lists(number, min_size=stages, max_size=stages))
    data: dict[str, Any] = {"devices": p, "microbatches": m, "stages_per_device": v, "placement": placement,
                            "split_backward": draw(st.booleans()),
                            "objective": draw(st.sampled_from(["makespan", "stage_span"])),
                            "costs": {"forward": draw(per_stage), "backward_input": draw(per_stage),
                                      "backward_weight": draw(per_stage), "comm": draw(number)},
                            "memory": {}}
    if placement == "dual" and draw(st.booleans()):
        data["dual_split"] = draw(st.integers(0, m))
    if draw(st.booleans()):
        data["costs"]["overlap_fb"] = draw(st.sampled_from([0.3, 1.0]))
    if draw(st.booleans()):
        data["memory"]["limit"] = draw(st.sampled_from([4.0, 10.0, [10.0 + d for d in range(p)]]))
    if draw(st.booleans()):
        data["memory"]["backward_input_transient"] = draw(per_stage)
    return data


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(), st.sampled_from([p for p in FIELDS if not _excluded(p)]))
def test_changing_any_field_of_any_problem_changes_its_key(data: dict[str, Any], path: str) -> None:
    problem = _valid(data)
    changed = _changed(data, path)
    other = _valid(changed) if changed is not None else None
    assume(problem is not None and other is not None)  # the fixed problems above cover every field
    assert problem_key(other) != problem_key(problem), path

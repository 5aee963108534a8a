"""Every per-op cost the budget charges is re-measured by ``benchmarks/phase_costs.py`` under its own
name: a field that script does not measure would be a figure nobody can re-derive."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from pipesched.solver import Problem
from pipesched.solver.budget import PER_OP, PerOpCosts

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "phase_costs.py"


def _script() -> ModuleType:
    sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("phase_costs_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measured_names(source: str) -> set[str]:
    """The keys ``measure`` writes (``out["name"] = ...``)."""
    tree = ast.parse(source)
    measure = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "measure")
    return {t.slice.value for node in ast.walk(measure) if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
            and t.value.id == "out" and isinstance(t.slice, ast.Constant)}


def test_every_field_is_measured_and_nothing_else() -> None:
    fields = {f.name for f in dataclasses.fields(PerOpCosts)}
    names = measured_names(SCRIPT.read_text())
    assert fields - names == set(), f"fields phase_costs.py does not measure: {sorted(fields - names)}"
    assert names - fields == {"GRID_OPS_PER_SECOND"}, f"measured but not charged: {sorted(names - fields)}"


def test_the_check_sees_a_missing_measurement() -> None:
    """Guard against a check that cannot fail: dropping one measurement is seen."""
    source = SCRIPT.read_text().replace('out["relax"]', 'unused["relax"]')
    assert "relax" not in measured_names(source)


def test_every_charged_figure_is_a_positive_number() -> None:
    assert all(isinstance(getattr(PER_OP, f.name), float) and getattr(PER_OP, f.name) > 0
               for f in dataclasses.fields(PerOpCosts))


def test_the_script_measures_a_small_v_problem() -> None:
    """The script runs (its imports and phase calls match the solver) and charges what it measures."""
    script = _script()
    problem = Problem(devices=2, microbatches=4, stages_per_device=2, placement="v",
                      costs={"forward": 1.0, "backward_input": 1.0, "backward_weight": 1.0, "comm": 0.1},
                      memory={"forward": 1.0, "backward_input": 0.0, "backward_weight": -1.0, "limit": 4.0})
    out = script.measure(problem)
    assert {"relax", "build", "zbv", "finalize"} <= set(out)
    assert all(script.charged_for(name) > 0 for name in out)

"""Methods are records: a role, the features they model, a cost; a feature a method does not model is
refused in one line naming it, never ignored."""

from __future__ import annotations

import pytest

from pipesched.solver import Method, NotApplicableError, Problem, methods, solve
from pipesched.solver.core.method import ALL_FEATURES, FEATURES, ROLES, problem_features
from pipesched.solver.heuristics.catalog import HEURISTICS, applicable

#: One problem per feature that uses exactly that feature (dual placement for the F&B pairs).
USES = {
    "memory.limit": {"memory": {"limit": 4}},
    "costs.comm": {"costs": {"comm": 0.5}},
    "costs.overlap_fb": {"placement": "dual", "stages_per_device": 2, "costs": {"overlap_fb": 0.7}},
    "memory.backward_input_transient": {"memory": {"backward_input_transient": 0.5}},
    "costs.grad_sync": {"costs": {"grad_sync": [0, 2]}},
    "costs.optimizer": {"costs": {"optimizer": 1.5}},
}


def test_every_feature_has_a_problem_that_uses_it_alone() -> None:
    assert set(USES) == set(FEATURES)
    for feature, fields in USES.items():
        assert problem_features(Problem(devices=2, microbatches=4, **fields)) == {feature}
    assert problem_features(Problem(devices=2, microbatches=4)) == frozenset()


def test_every_method_has_a_role_and_the_order_based_ones_model_every_feature() -> None:
    for m in methods():
        assert m.role in ROLES and m.summary
        if m.role in ("recipe", "search"):
            assert m.supports == ALL_FEATURES, m.name  # the simulator times their orders with every feature
            assert m.cost_per_op > 0, m.name
    assert {m.role for m in HEURISTICS} == {"recipe", "search"}


def test_a_feature_a_method_does_not_model_is_refused_naming_the_field() -> None:
    problem = Problem(devices=2, microbatches=4, **USES["costs.overlap_fb"])
    with pytest.raises(NotApplicableError, match=r"does not apply: ilp does not model costs\.overlap_fb;") as e:
        solve(problem, "ilp")
    assert "\n" not in str(e.value)


def test_a_record_refuses_any_feature_outside_its_supports() -> None:
    """The refusal comes from the record, whatever the method's own checks: a method that claims to model
    nothing refuses each feature by name, and runs on a problem that uses none."""
    bare = Method("bare", "test", "search", lambda p, o: solve(p, "gpipe"), supports=frozenset())
    for feature, fields in USES.items():
        assert bare.applies(Problem(devices=2, microbatches=4, **fields)) == f"bare does not model {feature}"
    assert bare.applies(Problem(devices=2, microbatches=4)) is None


def test_a_record_rejects_an_unknown_role_or_feature() -> None:
    with pytest.raises(ValueError, match="role"):
        Method("x", "x", "oracle", lambda p, o: solve(p, "gpipe"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown features"):
        Method("x", "x", "search", lambda p, o: solve(p, "gpipe"), supports=frozenset({"costs.pipeline_sync"}))


def test_heuristics_by_role_never_include_the_exact_models_or_the_portfolio() -> None:
    problem = Problem(devices=2, microbatches=4)
    names = [m.name for m in applicable(problem)]
    assert names == sorted(names) and not {"auto", "cpsat", "ilp"} & set(names)
    assert [m.name for m in applicable(problem, roles=("recipe",))] == [
        m.name for m in applicable(problem) if m.role == "recipe"]
    assert "greedy" not in [m.name for m in applicable(problem, exclude=["greedy"])]

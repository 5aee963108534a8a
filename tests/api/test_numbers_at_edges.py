"""Every finite number in a cost or memory field is either solved or refused with one line naming the
field: subnormal, huge, and mixed magnitudes that defeat integer scaling (CP-SAT) included. Before,
``costs.forward = 5e-324`` or a tiny memory delta under a large limit overflowed to infinity inside
the bounds and the scaling (HTTP 500, CLI exit 1)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pipesched.solver import Problem, SolveOptions, solve, validate
from pipesched.solver.core.errors import NotApplicableError

#: The whole finite range, weighted towards its edges (subnormals, the accepted bounds, just past them)
#: and towards magnitudes that are accepted but far apart.
EDGES = [0.0, 5e-324, 1e-320, 2.2250738585072014e-308, 1e-300, 1e-10, 1e-9, 3e-9, 1.0, 7.0, 999999999999.0, 1e12,
         1.0000001e12, 1e300, 1.7976931348623157e308]
NUMBER = st.one_of(st.sampled_from(EDGES), st.floats(min_value=1e-9, max_value=1e12),
                   st.floats(allow_nan=False, allow_infinity=False))
#: One number, or two stages' numbers drawn independently (mixed magnitudes within one field).
VALUE = st.one_of(NUMBER, st.lists(NUMBER, min_size=2, max_size=2))
SET = ("costs.forward", "costs.backward_weight", "costs.comm", "memory.forward", "memory.backward_input",
       "memory.limit")


def _problem(forward: object, weight: object, comm: float | None, delta: object, limit: float | None) -> dict:
    costs = {k: v for k, v in (("forward", forward), ("backward_weight", weight), ("comm", comm)) if v is not None}
    memory: dict = {"limit": limit}
    if delta is not None:  # the stage's deltas sum to zero: B gives back what F took
        memory |= {"forward": delta, "backward_input": [-x for x in delta] if isinstance(delta, list) else -delta,
                   "backward_weight": 0}
    return {"devices": 2, "microbatches": 3, "costs": costs, "memory": memory}


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(forward=st.one_of(st.none(), VALUE), weight=st.one_of(st.none(), VALUE), comm=st.one_of(st.none(), NUMBER),
       delta=st.one_of(st.none(), VALUE), limit=st.one_of(st.none(), NUMBER),
       method=st.sampled_from(["cpsat", "ilp", "greedy"]))
def test_every_finite_value_is_solved_or_refused_naming_the_field(forward: object, weight: object,
                                                                   comm: float | None, delta: object,
                                                                   limit: float | None, method: str) -> None:
    try:
        problem = Problem.model_validate(_problem(forward, weight, comm, delta, limit))
    except ValidationError as e:  # refused: each reason names a field that was set, and what is accepted
        reasons = [r for err in e.errors() for r in str(err["msg"]).removeprefix("Value error, ").split("; ")]
        assert reasons and all(r.startswith(SET) for r in reasons), reasons
        return
    try:
        schedule = solve(problem, method, SolveOptions(time_limit_s=0.5))
    except NotApplicableError as e:  # e.g. no schedule fits the limit: one line saying why
        assert str(e) and "\n" not in str(e)
        return
    assert validate(schedule) == [] or schedule.status == "infeasible"

"""A recomputing plan's transients reach its Problem, its reported peaks and the validator (issue 10)."""

from __future__ import annotations

import math

from planning_models import small_model

from pipesched.solver import validate
from pipesched.solver.core.instance import Instance
from pipesched.solver.core.metrics import peak_memory
from pipesched.solver.planning import Cluster
from pipesched.solver.planning.planner import plan
from pipesched.solver.planning.sums import stage_sums


def test_a_recomputed_stage_carries_its_transient_and_the_validator_counts_it() -> None:
    cluster = Cluster(devices=3, microbatches=6, memory_per_device=22.0)
    result = plan(small_model(8), cluster, "greedy", time_limit_s=2)
    assert result.schedule is not None and validate(result.schedule) == []
    layers = result.model.expanded()
    recomputed = [st for st in result.stages if st.recompute]
    assert recomputed, "22 per device needs recomputation somewhere"
    transient = result.problem.memory.backward_input_transient
    for st in result.stages:  # a recomputed stage's transient is its layers' full forward activations
        expected = math.fsum(x.mem_forward for x in layers[st.layers[0]:st.layers[1]] if x.recompute) \
            if st.recompute else 0.0
        assert math.isclose(transient[st.stage], expected, abs_tol=1e-9)
    for d, peak in enumerate(result.peak_memory):  # static + the schedule's peak, transients included
        static = math.fsum(stage_sums(layers, *st.layers, st.recompute).static for st in result.stages
                           if st.device == d)
        assert math.isclose(peak, static + result.schedule.peak_memory[d], abs_tol=1e-9) and peak <= 22.0 + 1e-9
    # Capped at the peak its ops reach without the transients, the same schedule is refused: the
    # validator sees the transient on top while the recomputed stage's B runs.
    d = next(st.device for st in recomputed)
    plain = peak_memory(Instance.from_problem(result.problem), result.schedule.order())
    assert plain[d] < result.schedule.peak_memory[d] - 1e-9
    limits = list(result.problem.memory.limit)
    limits[d] = plain[d]
    squeezed = result.problem.model_copy(update={"memory": result.problem.memory.model_copy(
        update={"limit": limits})})
    errors = validate(result.schedule.model_copy(update={"problem": squeezed}))
    assert any(e.startswith(f"device {d}: activation memory peaks at") for e in errors), errors

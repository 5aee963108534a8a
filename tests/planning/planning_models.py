"""Hand-built models for the planning tests (numbers chosen so sums are easy to check by hand)."""

from __future__ import annotations

from pipesched.solver.planning import Model


def small_model(blocks: int = 4) -> Model:
    """embed, ``blocks`` identical blocks that can be recomputed, and a heavy head."""
    return Model.model_validate({"layers": [
        {"name": "embed", "forward": 0.5, "backward_input": 0.0, "backward_weight": 0.5,
         "memory": {"forward": 0.5, "backward_input": -0.5}, "static": 2.0, "output": 1.0},
        {"name": "block", "repeat": blocks, "forward": 1.0, "backward_input": 1.0, "backward_weight": 1.0,
         "memory": {"forward": 2.0, "backward_input": -1.0, "backward_weight": -1.0}, "static": 3.0,
         "output": 1.0,
         "recompute": {"memory": {"forward": 0.25, "backward_input": -0.25}}},
        {"name": "head", "forward": 2.0, "backward_input": 2.0, "backward_weight": 2.0,
         "memory": {"forward": 4.0, "backward_input": -3.0, "backward_weight": -1.0}, "static": 4.0},
    ]})

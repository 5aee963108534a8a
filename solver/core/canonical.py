"""The canonical form and cache key of a problem: equivalent problems share one key.

The service, the client's local cache and the batch solver all key schedules with
:func:`problem_key`, so it lives beside the model (no FastAPI here) and the client can compute
it offline. Two problems get the same key exactly when they describe the same ops, durations,
memory deltas, limits and objective, however they were written:

- a per-stage list whose entries are all equal collapses to that one number (so does a
  per-device ``memory.limit``);
- every number of a cost, delta or limit is a float (``1``, ``1.0`` and ``1e0`` agree) and
  ``-0.0`` is ``0.0``; floats are written in Python's shortest round-trip form, so the key is
  exact (no rounding: two problems that differ in the last bit are different problems);
- with ``split_backward: false`` the fused B costs ``backward_input + backward_weight`` and
  changes memory by their sum, so only the sums matter: they are folded into
  ``backward_input`` and ``backward_weight`` becomes 0 (the same sums the instance computes);
- keys of the JSON are sorted and defaults are filled in, so key order and omitted defaults
  do not matter;
- under ``placement: "dual"`` the split is written resolved (``dual_split``, default ``m // 2``), so
  an omitted split and its default agree; other placements carry no ``dual_split`` key, so their
  keys are unchanged by its introduction (no version bump), and a dual problem never shares a key with
  its V twin (the placement differs); likewise ``costs.overlap_fb`` appears only when set.

The key is ``sha256`` of the canonical JSON, prefixed by a format version so a future change
of the rules above can never serve a stale entry. It does not depend on the method or the time
budget; the service records those beside the entry.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .problem import Problem

#: Bump when the canonical form changes: old cache entries then simply stop matching.
KEY_VERSION = "pipesched-problem-v1"

_PER_STAGE = ("forward", "backward_input", "backward_weight")


def _number(x: float) -> float:
    x = float(x)
    return 0.0 if x == 0 else x  # folds -0.0 into 0.0


def _collapse(value: float | list[float] | None) -> float | list[float] | None:
    """One number for a list of equal numbers; floats everywhere."""
    if value is None:
        return None
    if isinstance(value, list):
        values = [_number(x) for x in value]
        return values[0] if values and all(x == values[0] for x in values) else values
    return _number(value)


def _fold_fused(first: float | list[float], second: float | list[float], stages: int) -> tuple[Any, Any]:
    """``(first + second, 0)`` per stage: the fused backward only sees the sum."""
    a = first if isinstance(first, list) else [first] * stages
    b = second if isinstance(second, list) else [second] * stages
    return [float(x) + float(y) for x, y in zip(a, b, strict=True)], 0.0


def canonical_problem(problem: Problem) -> dict[str, Any]:
    """The normal form of ``problem`` as plain JSON data, keys in sorted order (see the module docstring).

    Reads the model's attributes directly rather than through ``model_dump``: this runs on every
    request the service sees.
    """
    c, m = problem.costs, problem.memory
    costs = {"backward_input": c.backward_input, "backward_weight": c.backward_weight, "comm": _collapse(c.comm),
             "forward": c.forward}
    memory = {"backward_input": m.backward_input, "backward_weight": m.backward_weight, "forward": m.forward,
              "limit": _collapse(m.limit)}
    if not problem.split_backward:
        stages = problem.num_model_stages
        for part in (costs, memory):
            part["backward_input"], part["backward_weight"] = _fold_fused(
                part["backward_input"], part["backward_weight"], stages
            )
    for field in _PER_STAGE:
        costs[field] = _collapse(costs[field])
        memory[field] = _collapse(memory[field])
    transient = _collapse(m.backward_input_transient)
    if transient != 0.0:  # only when set, so every key made before the field existed still matches
        memory["backward_input_transient"] = transient
    if c.overlap_fb is not None:  # absent (no F&B pairs) writes no key: older keys are unchanged
        costs["overlap_fb"] = _collapse(c.overlap_fb)
        costs = dict(sorted(costs.items()))
    out = {
        "costs": costs,
        "devices": problem.devices,
        "memory": memory,
        "microbatches": problem.microbatches,
        "objective": problem.objective,
        "placement": problem.placement,
        "split_backward": problem.split_backward,
        "stages_per_device": problem.stages_per_device,
    }
    if problem.placement == "dual":
        out["dual_split"] = problem.down_microbatches
        out = dict(sorted(out.items()))
    return out


def canonical_json(problem: Problem) -> str:
    """Compact JSON of the canonical form with sorted keys (the bytes that are hashed)."""
    return json.dumps(canonical_problem(problem), separators=(",", ":"), allow_nan=False)


def problem_key(problem: Problem | dict[str, Any]) -> str:
    """The cache key of a problem: sha256 hex of the versioned canonical JSON."""
    if not isinstance(problem, Problem):
        problem = Problem.model_validate(problem)
    digest = hashlib.sha256(f"{KEY_VERSION}\n{canonical_json(problem)}".encode())
    return digest.hexdigest()

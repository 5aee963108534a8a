"""The canonical form and cache key of a problem: equivalent problems share one key.

The service, the client's local cache and the batch solver all key schedules with
:func:`problem_key`, so it lives beside the model (no FastAPI here) and the client can compute
it offline.

Why derived and not listed: the canonical form is built by walking the :class:`Problem` model's own
fields, so a field added to the model is in the key without anyone remembering to add it; a field
that must not move the key is named in :data:`EXCLUDED` with its reason, and
``tests/solver/test_canonical_key.py`` changes every field of generated problems and checks the key
moves unless the field is excluded. Two problems get the same key exactly when they describe the same
ops, durations, memory deltas, limits and objective, however they were written:

- a list whose entries are all equal collapses to that one number (a per-stage cost or delta, a
  per-device ``memory.limit``, a per-boundary ``costs.comm``: each means that number everywhere);
- every number is a float (``1``, ``1.0`` and ``1e0`` agree) and ``-0.0`` is ``0.0``; floats are
  written in Python's shortest round-trip form, so the key is exact (no rounding: two problems that
  differ in the last bit are different problems);
- with ``split_backward: false`` the fused B costs ``backward_input + backward_weight`` and changes
  memory by their sum, so only the sums matter: they are folded into ``backward_input`` and
  ``backward_weight`` becomes 0 (the same sums the instance computes);
- under ``placement: "dual"`` the split is written resolved (``dual_split``, default ``m // 2``), so an
  omitted split and its default agree;
- keys of the JSON are sorted and defaults are filled in, so key order and omitted defaults do not
  matter. The fields of the first key format (:data:`ALWAYS_WRITTEN`) are always written; every
  field added since is written only when it differs from its default, so a key made before the field
  existed still matches the same problem (no version bump for an addition).

The key is ``sha256`` of the canonical JSON, prefixed by a format version so a future change
of the rules above can never serve a stale entry. It does not depend on the method or the time
budget; the service records those beside the entry.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel

from .problem import Problem

#: Bump when the canonical form changes: old cache entries then simply stop matching. v2: the
#: form is derived from the model's fields and sorted at every level (v1 wrote
#: ``memory.backward_input_transient`` after the other memory fields); otherwise the same data.
KEY_VERSION = "pipesched-problem-v2"

#: Fields that never move the key, with why (dotted paths from the Problem).
EXCLUDED: dict[str, str] = {
    "units": "labels for charts and summaries only; solving ignores them",
}
#: The fields the first key format wrote whatever their value (history: never extend this set).
ALWAYS_WRITTEN = frozenset({
    "devices", "microbatches", "stages_per_device", "placement", "split_backward", "objective",
    "costs", "costs.forward", "costs.backward_input", "costs.backward_weight", "costs.comm",
    "memory", "memory.forward", "memory.backward_input", "memory.backward_weight", "memory.limit",
})


#: Field annotations whose values are counts, written as integers.
_INTEGER_ANNOTATIONS = (int, int | None)


def _number(x: float) -> float:
    x = float(x)
    return 0.0 if x == 0 else x  # folds -0.0 into 0.0


def _normal(value: Any, counts: bool = False) -> Any:
    """Numbers as floats (``counts``: an integer field, kept an int); a list of equal numbers as that
    number; nested models as dicts."""
    if isinstance(value, BaseModel):
        return _walk(value, "")
    if isinstance(value, bool | str) or value is None:
        return value
    if isinstance(value, int | float):
        return int(value) if counts else _number(value)
    if isinstance(value, list | tuple):
        values = [_normal(x) for x in value]
        if values and all(isinstance(x, float) for x in values) and all(x == values[0] for x in values):
            return values[0]
        return values
    raise TypeError(f"no canonical form for {type(value).__name__}")


def _walk(model: BaseModel, prefix: str) -> dict[str, Any]:
    """The model's fields in canonical form, sorted (see the module docstring)."""
    out: dict[str, Any] = {}
    for name, info in type(model).model_fields.items():
        path = f"{prefix}{name}"
        if path in EXCLUDED:
            continue
        value = getattr(model, name)
        counts = info.annotation in _INTEGER_ANNOTATIONS
        if isinstance(value, BaseModel):
            normal: Any = _walk(value, f"{path}.")
        else:
            normal = _normal(value, counts)
        if path not in ALWAYS_WRITTEN:
            default = info.get_default(call_default_factory=True)
            if normal == (_walk(default, f"{path}.") if isinstance(default, BaseModel) else _normal(default, counts)):
                continue
        out[name] = normal
    return dict(sorted(out.items()))


def _semantic(problem: Problem) -> Problem:
    """``problem`` with the equivalences that are not about spelling resolved: the fused backward's
    sums and the dual placement's default split."""
    update: dict[str, Any] = {}
    if not problem.split_backward:
        stages = problem.num_model_stages
        for part in ("costs", "memory"):
            fields = getattr(problem, part)
            first = _per_stage(fields.backward_input, stages)
            second = _per_stage(fields.backward_weight, stages)
            update[part] = fields.model_copy(update={
                "backward_input": [float(a) + float(b) for a, b in zip(first, second, strict=True)],
                "backward_weight": 0.0})
    if problem.placement == "dual":
        update["dual_split"] = problem.down_microbatches
    return problem.model_copy(update=update) if update else problem


def _per_stage(value: float | list[float], stages: int) -> list[float]:
    return list(value) if isinstance(value, list) else [value] * stages


def canonical_problem(problem: Problem) -> dict[str, Any]:
    """The normal form of ``problem`` as plain JSON data, keys in sorted order (see the module docstring).

    Walks the model's attributes directly rather than through ``model_dump``: this runs on every
    request the service sees.
    """
    return _walk(_semantic(problem), "")


def canonical_json(problem: Problem) -> str:
    """Compact JSON of the canonical form with sorted keys (the bytes that are hashed)."""
    return json.dumps(canonical_problem(problem), separators=(",", ":"), allow_nan=False)


def problem_key(problem: Problem | dict[str, Any]) -> str:
    """The cache key of a problem: sha256 hex of the versioned canonical JSON."""
    if not isinstance(problem, Problem):
        problem = Problem.model_validate(problem)
    digest = hashlib.sha256(f"{KEY_VERSION}\n{canonical_json(problem)}".encode())
    return digest.hexdigest()

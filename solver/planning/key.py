"""The cache key of a plan request: equivalent (model, cluster, module names) share one key.

The service (``POST /v1/plan``), the client's local cache and ``pipesched batch`` key plans with
:func:`plan_key`, so it sits beside the models and needs no FastAPI. The canonical form is derived from
the models' own fields, never a list of them: every field that differs from its default is written
(a default is the same request however it was spelled, and a field added later leaves the keys of
requests that do not set it as they were), numbers as floats with ``-0.0`` folded into ``0.0``, keys
sorted; and for a cluster a per-device ``memory_per_device`` of equal entries is one number and the
microbatch choices are a sorted set (one choice is that number). The method and the time budget are
not part of the key: the service records them beside the entry.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .model import Cluster, Model

#: Bump when the canonical form changes: old cache entries then simply stop matching. v2: derived
#: from the fields (v1 listed the later ones by hand), and the default torchtitan module names changed
#: (``lm_head``), which plans cached without explicit names carry.
KEY_VERSION = "pipesched-plan-v2"


def _fold_zero(value: Any) -> Any:
    """Floats with ``-0.0`` as ``0.0``, everywhere in dumped JSON data."""
    if isinstance(value, float):
        return 0.0 if value == 0 else value
    if isinstance(value, dict):
        return {k: _fold_zero(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fold_zero(v) for v in value]
    return value


def canonical_request(model: Model, cluster: Cluster, module_names: str | None = None) -> dict[str, Any]:
    """The normal form of a plan request as plain JSON data (see the module docstring)."""
    c = cluster.model_dump(mode="json", exclude_defaults=True)
    choices = cluster.microbatch_choices()
    c["microbatches"] = choices[0] if len(choices) == 1 else choices
    mem = cluster.memory_per_device
    if isinstance(mem, list):
        c["memory_per_device"] = float(mem[0]) if all(x == mem[0] for x in mem) else [float(x) for x in mem]
    elif mem is not None:
        c["memory_per_device"] = float(mem)
    out: dict[str, Any] = {"cluster": c, "model": model.model_dump(mode="json", exclude_defaults=True)}
    if module_names is not None:
        out["module_names"] = module_names
    return _fold_zero(out)


def plan_key(model: Model, cluster: Cluster, module_names: str | None = None) -> str:
    """sha256 hex of the versioned canonical JSON of a plan request."""
    text = json.dumps(canonical_request(model, cluster, module_names), sort_keys=True, separators=(",", ":"),
                      allow_nan=False)
    return hashlib.sha256(f"{KEY_VERSION}\n{text}".encode()).hexdigest()

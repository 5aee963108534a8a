"""pipesched.runtime: replay schedules on torch.distributed, export to torch's CSV, profile costs.

Importing this package does not import torch (the CLI and the service install without it);
the torch-backed pieces load on first use: ``PipelineExecutor``, ``profile``, ``run_ranks``.
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import PipelineError, PipelineTimeoutError, ScheduleMismatchError

_LAZY = {
    "PipelineExecutor": "pipesched.runtime.replay.executor",
    "run_ranks": "pipesched.runtime.launch",
    "profile": "pipesched.runtime.profiling.profile",
    "profile_layers": "pipesched.runtime.profiling.profile_layers", "profile_link": "pipesched.runtime.profiling.profile_layers",
}

__all__ = ["PipelineError", "PipelineExecutor", "PipelineTimeoutError", "ScheduleMismatchError", "profile",
           "profile_layers", "profile_link", "run_ranks"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        try:
            module = importlib.import_module(_LAZY[name])
        except ModuleNotFoundError as e:
            if e.name != "torch" and not (e.name or "").startswith("torch."):
                raise
            raise ModuleNotFoundError(
                f"pipesched.runtime.{name} needs torch, which is not installed: pip install 'pipesched[runtime]'",
                name=e.name) from None
        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pipesched.runtime' has no attribute {name!r}")

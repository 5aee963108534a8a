"""torch for the solver tests that compare with torch's own schedules (a uniquely named module: every
test folder is on the path). Without torch they skip with the reason; under ``PIPESCHED_REQUIRE_TORCH=1``
(as ``.ci/run`` sets) a missing or broken torch fails them, so CI cannot pass by skipping."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def torch_module(name: str) -> ModuleType:
    """``import name`` (a torch module), or skip / fail as the module docstring says."""
    if os.environ.get("PIPESCHED_REQUIRE_TORCH") == "1":
        return importlib.import_module(name)
    return pytest.importorskip(name, reason="torch is not installed (pip install 'pipesched[runtime]')")

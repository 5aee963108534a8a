"""Without torch, the runtime's torch-backed names say which extra to install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_pipeline_executor_without_torch_names_the_runtime_extra(tmp_path: Path) -> None:
    (tmp_path / "torch.py").write_text(  # this interpreter's torch, as if it were not installed
        "raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    done = subprocess.run([sys.executable, "-c", "from pipesched.runtime import PipelineExecutor"], text=True,
                          capture_output=True, timeout=120, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert done.returncode == 1
    assert "pipesched.runtime.PipelineExecutor needs torch, which is not installed: " \
           "pip install 'pipesched[runtime]'" in done.stderr, done.stderr

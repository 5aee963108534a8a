"""The runtime keeps freed host memory: a tensor allocated again after a free does not page-fault.

Counted in minor page faults of a fresh process (``getrusage``), not in time: when a step frees its
held activations, the default glibc allocator trims the heap's free top back to the kernel, so the
next step faults every page in again (~2048 per 8 MiB tensor); with :func:`keep_freed_host_memory`
the heap is kept and reused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

_PROBE = r"""
import json, resource, sys
import torch
from pipesched.runtime.host_memory import keep_freed_host_memory
applied = keep_freed_host_memory() if sys.argv[1] == "keep" else False
faults = []
for _ in range(10):  # a step: activations of 6 microbatches held, then all freed
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    held = [torch.ones(256, 8192) for _ in range(6)]  # 8 MiB each, written: every page touched
    del held
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
faults = sum(faults[5:])  # after the heap has settled
again = keep_freed_host_memory() if applied else False
print(json.dumps({"applied": applied, "again": again, "faults": faults}))
"""


def _probe(mode: str, **env: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, timeout=120,
                         env={**os.environ, **env}, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


#: glibc's starting thresholds (128 KiB), pinned: left alone it moves them by what it has seen, so a
#: fresh process faults on every step or on none depending on its first frees; pinned, it always does.
_FAULTING = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}


def test_kept_memory_is_reused_without_page_faults() -> None:
    default = _probe("default", **_FAULTING)
    kept = _probe("keep", **_FAULTING)
    if not sys.platform.startswith("linux"):  # no glibc: nothing to set, and it says so
        assert not kept["applied"]
        return
    assert kept["applied"] and kept["again"], "mallopt should apply once and report it on every call"
    # the last 5 of 10 steps hold 5 x 48 MiB = 61440 pages: the faulting allocator returns them and
    # faults them in again every step; kept, the heap has them all from the first steps
    assert default["faults"] > 3 * 12288, default
    assert kept["faults"] < 1024, kept


def test_opt_out_leaves_the_allocator_alone() -> None:
    out = _probe("keep", PIPESCHED_HOST_MALLOC="default")
    assert out == {"applied": False, "again": False, "faults": out["faults"]}

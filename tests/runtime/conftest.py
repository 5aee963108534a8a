"""Runtime tests: gloo on 127.0.0.1 (free ports), one thread per process, every spawn time-bounded.

Spawning processes that import torch costs seconds each, so each spawned group replays many
schedules; ``run_ranks`` kills any process still running at its timeout and fails the test.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

#: Upper bound for one spawned group (start-up ~3 s per process on a loaded 2-core machine).
GROUP_TIMEOUT_S = 90.0

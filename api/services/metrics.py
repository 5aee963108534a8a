"""Service counters in the Prometheus text exposition format (written by hand: a few lines).

Per process: each replica exports its own figures and Prometheus sums them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

#: Upper bounds (seconds) of the solve-time histogram buckets.
SOLVE_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


@dataclass
class Metrics:
    requests: Counter[tuple[str, str, int]] = field(default_factory=Counter)  # (route, http method, status)
    cache_hits: int = 0
    fast_hits: int = 0  # of cache_hits, those answered from memory before routing
    cache_misses: int = 0
    shared_solves: int = 0  # requests that joined a solve already in flight
    solves: Counter[str] = field(default_factory=Counter)  # outcome -> count
    solves_running: int = 0
    solves_queued: int = 0
    solve_buckets: list[int] = field(default_factory=lambda: [0] * len(SOLVE_BUCKETS))
    solve_seconds_sum: float = 0.0
    solve_seconds_count: int = 0

    def observe_solve(self, outcome: str, seconds: float) -> None:
        self.solves[outcome] += 1
        self.solve_seconds_sum += seconds
        self.solve_seconds_count += 1
        for i, upper in enumerate(SOLVE_BUCKETS):
            if seconds <= upper:
                self.solve_buckets[i] += 1

    def render(self) -> str:
        lines = [
            "# HELP pipesched_http_requests_total HTTP requests by route, method and status.",
            "# TYPE pipesched_http_requests_total counter",
        ]
        for (route, verb, status), n in sorted(self.requests.items()):
            lines.append(f'pipesched_http_requests_total{{route="{_esc(route)}",method="{verb}",status="{status}"}} {n}')
        lines += [
            "# HELP pipesched_cache_hits_total Solve requests answered from the cache.",
            "# TYPE pipesched_cache_hits_total counter",
            f"pipesched_cache_hits_total {self.cache_hits}",
            "# HELP pipesched_cache_hits_fast_total Of those, answered from memory before routing (no store read).",
            "# TYPE pipesched_cache_hits_fast_total counter",
            f"pipesched_cache_hits_fast_total {self.fast_hits}",
            "# HELP pipesched_cache_misses_total Solve requests that needed a solve (new or improving).",
            "# TYPE pipesched_cache_misses_total counter",
            f"pipesched_cache_misses_total {self.cache_misses}",
            "# HELP pipesched_shared_solves_total Requests that joined an identical solve already in flight.",
            "# TYPE pipesched_shared_solves_total counter",
            f"pipesched_shared_solves_total {self.shared_solves}",
            "# HELP pipesched_solves_total Solver processes finished, by outcome.",
            "# TYPE pipesched_solves_total counter",
        ]
        for outcome in sorted(set(self.solves) | {"ok"}):
            lines.append(f'pipesched_solves_total{{outcome="{outcome}"}} {self.solves[outcome]}')
        lines += [
            "# HELP pipesched_solves_in_flight Solver processes running now.",
            "# TYPE pipesched_solves_in_flight gauge",
            f"pipesched_solves_in_flight {self.solves_running}",
            "# HELP pipesched_solves_queued Solves waiting for a free solver process.",
            "# TYPE pipesched_solves_queued gauge",
            f"pipesched_solves_queued {self.solves_queued}",
            "# HELP pipesched_solve_seconds Wall-clock seconds per solve (process start to answer).",
            "# TYPE pipesched_solve_seconds histogram",
        ]
        for upper, n in zip(SOLVE_BUCKETS, self.solve_buckets, strict=True):
            lines.append(f'pipesched_solve_seconds_bucket{{le="{upper:g}"}} {n}')
        lines += [
            f'pipesched_solve_seconds_bucket{{le="+Inf"}} {self.solve_seconds_count}',
            f"pipesched_solve_seconds_sum {self.solve_seconds_sum:.6f}",
            f"pipesched_solve_seconds_count {self.solve_seconds_count}",
        ]
        return "\n".join(lines) + "\n"


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

"""A local two-node Ray cluster for the tests: ``ray start --head`` on 127.0.0.1 and a second
``ray start --address``, one CPU each, on free ports, stopped (every process it started, by id) after."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from scaleout_parts import free_port


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                kids.setdefault(ppid, []).append(int(entry.name))
    return kids


def _tree(roots: list[int]) -> list[int]:
    kids, out, todo = _children(), [], list(roots)
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += kids.get(pid, [])
    return out


class RayCluster:
    def __init__(self, base: Path) -> None:
        # Ray's socket paths must stay short: a short temp dir of our own, unique per run.
        self.temp_dir = Path(f"/tmp/psray_{uuid.uuid4().hex[:8]}")
        self.log = base / "ray.log"
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.node_manager_ports: list[int] = []
        # Ray's token authentication, with a token of this cluster's own: head, node and driver share it.
        self.env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token",
                    "RAY_AUTH_TOKEN": uuid.uuid4().hex + uuid.uuid4().hex}

    def _start(self, head: bool) -> None:
        first = random.randrange(20000, 32000, 200)  # worker ports, below the ephemeral range free_port draws from
        nm_port = free_port()
        args = ["timeout", "-s", "KILL", "240", "ray", "start", "--num-cpus", "1", "--disable-usage-stats",
                "--node-ip-address", "127.0.0.1", "--object-store-memory", str(80 * 1024 * 1024),
                "--min-worker-port", str(first), "--max-worker-port", str(first + 150),
                "--node-manager-port", str(nm_port), "--dashboard-agent-listen-port", str(free_port()),
                "--dashboard-agent-grpc-port", str(free_port()), "--runtime-env-agent-port", str(free_port()),
                "--metrics-export-port", str(free_port())]
        if head:
            args += ["--head", "--port", str(self.port), "--include-dashboard", "false",
                     "--temp-dir", str(self.temp_dir)]
        else:
            args += ["--address", self.address]
        with open(self.log, "ab") as out:
            done = subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, env=self.env, timeout=270)
        if done.returncode != 0:
            raise RuntimeError(f"ray start failed ({done.returncode}): {self.log.read_text()[-3000:]}")
        self.node_manager_ports.append(nm_port)

    def start(self) -> RayCluster:
        self._start(head=True)
        self._start(head=False)
        self._warm_second_node()
        return self

    def _warm_second_node(self) -> None:
        """Wait until the second node is alive with its CPU and has run one task (so a worker of its
        own is up): otherwise, on a loaded machine, a short sweep could end on the head alone while
        the second node still started its first worker (seen once: "no solve ran on the second node")."""
        script = f"""
import time, ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
ray.init(address="{self.address}", log_to_driver=False)
end = time.monotonic() + 120
while True:
    nodes = [n for n in ray.nodes() if n["Alive"] and n["NodeManagerPort"] == {self.node_manager_ports[1]}]
    if nodes and nodes[0]["Resources"].get("CPU", 0) >= 1 or time.monotonic() > end:
        break
    time.sleep(0.2)
assert nodes, "the second node did not join"
where = NodeAffinitySchedulingStrategy(node_id=nodes[0]["NodeID"], soft=False)
print(ray.get(ray.remote(num_cpus=1)(lambda: 1).options(scheduling_strategy=where).remote(), timeout=120))
"""
        with open(self.log, "ab") as out:
            done = subprocess.run(["timeout", "-s", "KILL", "240", sys.executable, "-c", script], stdout=out,
                                  stderr=subprocess.STDOUT, env=self.env, timeout=270)
        if done.returncode != 0:
            raise RuntimeError(f"warming the second Ray node failed ({done.returncode}): {self.log.read_text()[-3000:]}")

    def _pids(self, needle: str) -> list[int]:
        return [int(p.name) for p in Path("/proc").iterdir()
                if p.name.isdigit() and needle in _cmdline(int(p.name))]

    def kill_second_node(self, timeout_s: float = 60) -> bool:
        """SIGKILL the second node's raylet and everything under it (its workers, agents), at a moment
        when one of its workers is running a solve (Ray titles it ``ray::_solve_chunk``; an idle one
        is ``ray::IDLE``). Returns whether a solve was running at the kill (False: the deadline passed)."""
        deadline = time.monotonic() + timeout_s
        while True:
            raylets = [p for p in self._pids(f"--node_manager_port={self.node_manager_ports[1]}")
                       if "raylet" in _cmdline(p)]
            assert len(raylets) == 1, raylets
            victims = _tree(raylets)
            busy = any(_cmdline(p).startswith("ray::_solve_chunk") for p in victims)
            if busy or time.monotonic() > deadline:
                break
            time.sleep(0.005)
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return busy

    def stop(self) -> None:
        """Every process of this cluster: those naming its temp dir, and their descendants."""
        for _ in range(3):
            victims = _tree(self._pids(str(self.temp_dir)))
            if not victims:
                break
            for pid in victims:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(1)
        subprocess.run(["rm", "-rf", str(self.temp_dir)], check=False)

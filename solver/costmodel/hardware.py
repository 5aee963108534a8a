"""Devices and links as a cost model sees them: peak throughput, achieved fraction, memory, link speed.

The presets are vendor datasheet figures (dense 16-bit tensor-core peak, no sparsity) and an
achieved model-FLOPs utilisation (MFU) calibrated on published training runs; docs/costs.md lists the
sources. Replace them with measured figures (``pipesched.runtime.profiling.profile_layers`` / ``profile_link``)
whenever a real machine is at hand.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Bytes in one GiB (the Model's memory unit).
GIB = 2.0**30


@dataclass(frozen=True)
class DeviceSpec:
    """One accelerator: ``peak_tflops`` dense 16-bit peak, ``mfu`` the fraction of it a training
    step achieves on the FLOPs this model counts, ``memory_gib`` its memory, ``hbm_tbps`` its memory
    bandwidth in TB/s (times the memory-bound pieces: embedding gather, softmax of the loss)."""

    name: str
    peak_tflops: float
    memory_gib: float
    mfu: float
    hbm_tbps: float = 2.0

    def __post_init__(self) -> None:
        for field, value in (("peak_tflops", self.peak_tflops), ("memory_gib", self.memory_gib),
                             ("hbm_tbps", self.hbm_tbps)):
            if not value > 0:
                raise ValueError(f"device {self.name!r}: {field} must be > 0 (got {value})")
        if not 0 < self.mfu <= 1:
            raise ValueError(f"device {self.name!r}: mfu must be in (0, 1] (got {self.mfu})")

    def matmul_ms(self, flops: float) -> float:
        """Milliseconds for ``flops`` at the achieved rate ``peak × mfu``."""
        return flops / (self.peak_tflops * 1e12 * self.mfu) * 1e3

    def memory_ms(self, nbytes: float) -> float:
        """Milliseconds to stream ``nbytes`` through memory at the datasheet bandwidth."""
        return nbytes / (self.hbm_tbps * 1e12) * 1e3


@dataclass(frozen=True)
class LinkSpec:
    """A point-to-point link: ``latency_us`` per message, ``gbps`` in gigabits per second (the
    unit networks are quoted in; NVLink's 450 GB/s per direction is 3600 Gbit/s)."""

    name: str
    latency_us: float
    gbps: float

    def __post_init__(self) -> None:
        if not self.latency_us >= 0:
            raise ValueError(f"link {self.name!r}: latency_us must be >= 0 (got {self.latency_us})")
        if not self.gbps > 0:
            raise ValueError(f"link {self.name!r}: gbps must be > 0 (got {self.gbps})")

    @property
    def latency_ms(self) -> float:
        return self.latency_us * 1e-3

    @property
    def gib_per_ms(self) -> float:
        """Bandwidth in the Model's units (GiB per ms): ``gbps · 1e9 / 8`` bytes/s."""
        return self.gbps * 1e9 / 8 / GIB / 1e3


#: NVIDIA datasheets: H100 SXM 989 TFLOP/s dense BF16, 80 GB HBM3 at 3.35 TB/s; A100 SXM 80 GB
#: 312 TFLOP/s, 2.04 TB/s; H200 SXM same compute as H100, 141 GB HBM3e at 4.8 TB/s (nvidia-smi
#: reports about 140 GiB usable). MFU: H100/H200 0.40 (Llama 3 paper, Dubey et al. 2024, Table 4:
#: 38-43% BF16 MFU on 8k-16k H100s); A100 0.50 (Narayanan et al. 2021, Megatron-LM at scale:
#: 44-52% of peak per A100, counting executed FLOPs).
DEVICES: dict[str, DeviceSpec] = {
    "h100": DeviceSpec("h100", peak_tflops=989.0, memory_gib=80.0, mfu=0.40, hbm_tbps=3.35),
    "a100": DeviceSpec("a100", peak_tflops=312.0, memory_gib=80.0, mfu=0.50, hbm_tbps=2.04),
    "h200": DeviceSpec("h200", peak_tflops=989.0, memory_gib=140.0, mfu=0.40, hbm_tbps=4.8),
}

#: NVLink 4 (H100 SXM): 900 GB/s total, 450 GB/s = 3600 Gbit/s per direction; InfiniBand NDR: one
#: 400 Gbit/s port per GPU. Latencies are NCCL-level send/recv figures (kernel launch and
#: protocol included), not wire latencies: measure them with ``profile_link`` where possible.
LINKS: dict[str, LinkSpec] = {
    "nvlink": LinkSpec("nvlink", latency_us=10.0, gbps=3600.0),
    "ib": LinkSpec("ib", latency_us=20.0, gbps=400.0),
}

"""Memory limits a person can state: a multiple of 1F1B's per-device peak (``"1.5x1f1b"``).

Practitioners and the zero-bubble paper (Qi et al., 2023, "Zero Bubble Pipeline Parallelism",
Table 3: ZB-1p holds what 1F1B holds, ZB-2p twice that) speak of memory relative to 1F1B. The
text form is resolved at validation into one number per device, so the canonical problem, the
cache key, the solvers and the validator only ever see numbers.

1F1B's peak on device ``d`` in closed form (Narayanan et al., 2021, PipeDream-Flush): the device
runs ``k_d = min(p - d, m)`` warm-up forwards before its first backward and then keeps ``k_d``
microbatches in flight, one of them in its backward::

    peak_d = (k_d - 1) * f_d + max(f_d, f_d + max(b_d, 0), f_d + b_d + max(w_d, 0))

with ``f_d, b_d, w_d`` one microbatch's F, B and W deltas summed over the device's stages (for
``v >= 2`` the device's chunks count as one stage of the 1F1B it is compared with) and, with fused
backward, ``b_d + w_d`` as one B op (positive deltas are held from an op's start). With the
default deltas (1, 0, -1) this is ``min(p - d, m)``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: ``"<k>x1f1b"``: k times 1F1B's per-device peak (k > 0), e.g. ``"1.5x1f1b"``.
RELATIVE_LIMIT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*[x×*]\s*1f1b\s*$", re.IGNORECASE)

#: Relative slack before a peak counts as above 1F1B's (float noise in the deltas' sums).
_ABOVE = 1e-9


def relative_factor(text: str) -> float:
    """The ``k`` of ``"<k>x1f1b"``; ValueError naming the accepted form otherwise."""
    match = RELATIVE_LIMIT.match(text)
    if match is None:
        raise ValueError(
            f"memory.limit {text!r} is not a limit: give a number, one number per device, null (no limit), "
            "or a multiple of 1F1B's per-device peak such as '1x1f1b' or '1.5x1f1b'")
    k = float(match.group(1))
    if not k > 0:
        raise ValueError(f"memory.limit {text!r}: the multiple of 1F1B's peak must be > 0")
    return k


def device_of_stage(stage: int, devices: int, placement: str) -> int:
    """Stage -> device: ``s % p`` (loop) or the V shape (``s`` for ``s < p``, else ``2p - 1 - s``)."""
    if placement == "v":
        return stage if stage < devices else 2 * devices - 1 - stage
    return stage % devices


def one_f_one_b_peaks(devices: int, microbatches: int, placement: str, split_backward: bool,
                      forward: Sequence[float], backward_input: Sequence[float],
                      backward_weight: Sequence[float]) -> list[float]:
    """1F1B's peak activation memory per device (module docstring); per-stage deltas in model order."""
    f, b, w = [0.0] * devices, [0.0] * devices, [0.0] * devices
    for s in range(len(forward)):
        d = device_of_stage(s, devices, placement)
        f[d] += forward[s]
        b[d] += backward_input[s]
        w[d] += backward_weight[s]
    peaks = []
    for d in range(devices):
        fd, bd, wd = f[d], b[d], w[d]
        if not split_backward:
            bd, wd = bd + wd, 0.0
        k = min(devices - d, microbatches)
        peaks.append((k - 1) * fd + max(fd, fd + max(bd, 0.0), fd + bd + max(wd, 0.0)))
    return peaks


def resolve(k: float, peaks: Sequence[float]) -> list[float]:
    return [k * x for x in peaks]


def above_one_f_one_b(peaks: Sequence[float], reference: Sequence[float]) -> str | None:
    """Why a schedule found without a limit may surprise: the first device where it holds more than
    1F1B would, or None."""
    for d, (peak, ref) in enumerate(zip(peaks, reference, strict=True)):
        if peak > ref + _ABOVE * max(1.0, abs(ref)):
            ratio = f" ({peak / ref:.2g}x)" if ref > 0 else ""
            return (f"no memory.limit: device {d} peaks at {peak:g}, above 1F1B's {ref:g} there{ratio}; "
                    "set memory.limit, e.g. \"1x1f1b\" (1F1B's memory) or \"1.5x1f1b\"")
    return None

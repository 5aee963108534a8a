"""Keep freed host memory in the process, so CPU ops cost what the profiler measured.

Why: on the CPU, torch allocates tensors with the C library's ``malloc``. glibc hands blocks above
its mmap threshold straight back to the kernel when they are freed and trims the heap's free top,
so the next op that needs that memory page-faults it in again (a 2 x 128 x 8192 logits tensor is
8 MB: 2048 faults, several ms on a VM). A profiler that repeats one op reuses the same block and
never pays that; a replay whose ops free and allocate in schedule order pays it on some ops and not
others. Measured on ``benchmarks/fidelity.py``'s model, p = 2 (``docs/costs.md``, "Host memory"):
interleaved 1F1B's step went from 26% above its prediction to 2%. Keeping freed memory is what
torch's caching allocator does on GPUs and what jemalloc or tcmalloc (which torch's CPU tuning
guide recommends) do on hosts; this sets glibc's equivalent (``mallopt``) once per process.

Opt out with ``PIPESCHED_HOST_MALLOC=default`` (the C library's defaults stay untouched).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

#: glibc's ``mallopt`` parameters (malloc.h).
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
#: The largest mmap threshold glibc accepts on 64-bit (4 MiB x sizeof(long)): blocks up to it are
#: served from the heap and reused; setting it also stops glibc from moving it.
_MMAP_THRESHOLD_MAX = 32 * 2**20
#: Trim the heap's free top only past 2 GiB (mallopt takes an int); grow it in steps this large.
_TRIM_NEVER = 2**31 - 1
_TOP_PAD = 64 * 2**20

_applied: bool | None = None


def keep_freed_host_memory() -> bool:
    """Set glibc's allocator to keep freed blocks (once per process); True when it is in effect.

    Does nothing (False) off Linux/glibc or when ``PIPESCHED_HOST_MALLOC=default``.
    """
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    if os.environ.get("PIPESCHED_HOST_MALLOC", "keep") == "default" or not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and others: no mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = [mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX),
          mallopt(_M_TRIM_THRESHOLD, _TRIM_NEVER),
          mallopt(_M_TOP_PAD, _TOP_PAD)]
    _applied = all(r == 1 for r in ok)
    return _applied

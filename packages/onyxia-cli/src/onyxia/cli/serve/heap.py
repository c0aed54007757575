"""A server process's C heap: glibc's mmap threshold fixed, so transient peaks are given back.

glibc serves a large allocation (128 KiB and up, by default) with its own mmap and returns it to the system on
free; but freeing one raises the threshold to that size (up to 32 MiB), so later allocations of that size come
from the heap, whose freed memory the process keeps. A server meets large transient arrays now and then (a
64k-token prompt tokenized before it is refused, a burst's feeds), and its RSS then stepped up by 20-30 MiB at
some request of a soak, once, at a different request each run: `tools/soak.py` on gemma3-tiny with 8 slots
drifted +3.95%, +0.17%, +6.55%, +7.44%, +7.67% and +8.93% over 2,000 requests (the issue's bar is 5%).
With the threshold fixed at 1 MiB (`MALLOC_MMAP_THRESHOLD_=1048576` in the server's environment, then this
module's `mallopt(M_MMAP_THRESHOLD)`; either turns the adjustment off) runs drifted +1.22%, +0.78%, +1.27%,
+0.72% (q4f16) and +1.28% (fp32), smoothly, from a lower baseline (331-343 against 342-350 MiB). The decode path
allocates nothing that large per step (it reads back token ids; the largest per-step array, logits for
host-side sampling, is one row of the vocabulary per stream: a mmap per step only past 1 MiB).

`onyxia serve` and the Ray Serve replicas call `fix_mmap_threshold()` before loading the model. A process
whose environment already sets `MALLOC_MMAP_THRESHOLD_` keeps its own setting; elsewhere than glibc this does
nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

__all__ = ["MMAP_THRESHOLD", "fix_mmap_threshold"]

MMAP_THRESHOLD = 1 << 20  # bytes: allocations from here up are mmapped and given back when freed
_M_MMAP_THRESHOLD = -3  # glibc's malloc.h


def fix_mmap_threshold(threshold: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at `threshold` bytes for this process; whether it was set (False off glibc,
    or where the environment sets `MALLOC_MMAP_THRESHOLD_`)."""
    if platform.libc_ver()[0] != "glibc" or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, threshold))

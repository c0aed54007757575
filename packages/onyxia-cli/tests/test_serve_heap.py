"""`onyxia serve`'s heap setting (serve/heap.py): glibc's mmap threshold fixed, so a freed large allocation no
longer moves later ones of its size into the heap (whose memory the process keeps: the soak's RSS steps)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from onyxia.cli.serve.heap import fix_mmap_threshold

# In a process of its own: free a 4 MiB block, then allocate 2 MiB and count glibc's mmapped chunks around it
# (mallinfo2's hblks). glibc's default raises its threshold to 4 MiB on that free, so the 2 MiB comes from the heap.
_PROBE = """
import ctypes, ctypes.util, sys
from onyxia.cli.serve.heap import fix_mmap_threshold

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.mallinfo2.restype = MallInfo2
if sys.argv[1] == "fixed":
    assert fix_mmap_threshold()
block = bytearray(4 << 20)
del block
before = libc.mallinfo2().hblks
block = bytearray(2 << 20)
print(libc.mallinfo2().hblks - before)
"""


def _mmapped_after_a_larger_free(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def test_a_freed_peak_no_longer_moves_large_allocations_into_the_heap() -> None:
    assert platform.libc_ver()[0] == "glibc"  # the machines this project runs on (Debian); elsewhere it is a no-op
    assert _mmapped_after_a_larger_free("default") == 0  # glibc's adjustment: the 2 MiB came from the heap
    assert _mmapped_after_a_larger_free("fixed") == 1  # fixed at 1 MiB: mmapped, given back when freed


def test_an_environment_setting_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    assert fix_mmap_threshold() is False

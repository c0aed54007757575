"""`short_loop`: whether a loop over a static dim is short enough for Mesa to unroll, so its shader keeps it a loop.

Mesa unrolls a loop whose trip count it can compute when the unrolled body stays small, and lavapipe then compiles
the unrolled loads for seconds: a one-row MatMulGroup took 0.7 s to compile at K 16 (4 trips), 2.3 s at K 32,
7.8 s at K 48 and 6.3 s at K 56 (14 trips); at K 60 (15) and above Mesa left the loop alone, 0.13 s. A fresh
machine paid that once per shape, in every small model and every test of one. Such a shader bounds the loop by
`onyxia::rolled` instead (0.2 s at K 48). Longer loops keep their literal bound: a rolled bound there cost 1-5% of a
Qwen2.5-0.5B q4 decode step (the compiler loses what the known count gave it), so full-size models run the code
they ran.
"""

from __future__ import annotations

from onyxia.core import SymbolicDim

__all__ = ["MAX_UNROLLED_TRIPS", "short_loop"]

MAX_UNROLLED_TRIPS = 16  # at most this many trips may be unrolled (14 were, measured on Mesa 25.0 with LLVM 15)


def short_loop(count: SymbolicDim, step: int = 1) -> bool:
    """Whether a loop from 0 to `count` by `step` has a known trip count Mesa may unroll (a symbolic count is an
    immediate: no compiler knows it)."""
    return isinstance(count, int) and -(-count // step) <= MAX_UNROLLED_TRIPS

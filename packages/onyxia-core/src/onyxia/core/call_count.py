"""Work measured in function calls: a count that a loaded machine does not change.

"This pass is near-linear" is a claim about how work grows with graph size. Seconds say it badly on a
shared machine (a pause in one run fails the comparison), so the growth tests compare how many Python
and C function calls a piece of work makes at two sizes: the count depends only on the code and the
input. Seconds stay the benchmarks' (``python -m onyxia.cli.bench.compile_scaling``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

__all__ = ["count_calls"]

T = TypeVar("T")


def count_calls(work: Callable[[], T]) -> tuple[T, int]:
    """Run `work()` and return its result with the number of function calls made inside it."""
    calls = [0]

    def count(frame: FrameType, event: str, arg: Any) -> None:
        if event in ("call", "c_call"):
            calls[0] += 1

    previous = sys.getprofile()
    sys.setprofile(count)
    try:
        result = work()
    finally:
        sys.setprofile(previous)
    return result, calls[0]

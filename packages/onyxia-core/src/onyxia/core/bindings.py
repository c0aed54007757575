"""The planning-time storage-binding limit, and the one way operators split a big input into ranges.

WebGPU caps a single storage binding (``maxStorageBufferBindingSize``, 128 MiB by default and on
lavapipe) far below the buffer size an adapter allows, and a real LLM's weights pass it: Gemma 3
270m's f32 tied embedding is 262144 x 640 = 671 MB. Operators that read such an input split their
work into one dispatch per range of rows (`PlanCtx.chunks`), each binding only its range. Ranges
start at multiples of `BINDING_ALIGNMENT`, the portable ``min-storage-buffer-offset-alignment``.

The limit is `MAX_BINDING_BYTES` unless the `max_binding_bytes` setting (``ONYXIA_MAX_BINDING_BYTES``,
`override`, or `binding_limit()` for a block) lowers it, which is how tests exercise the split with
small tensors.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from onyxia.core.errors import PlanningError
from onyxia.core.plan import BufferRef
from onyxia.core.settings import BINDING_ALIGNMENT, override, settings
from onyxia.core.symbolic import SymbolicDim

__all__ = [
    "BINDING_ALIGNMENT",
    "MAX_BINDING_BYTES",
    "BufferRange",
    "Chunk",
    "binding_limit",
    "max_binding_bytes",
    "split_rows",
]

MAX_BINDING_BYTES = 128 << 20  # WebGPU's default maxStorageBufferBindingSize, and lavapipe's
# BINDING_ALIGNMENT (256) is the largest min-storage-buffer-offset-alignment WebGPU allows (lavapipe: 32);
# it lives in onyxia.core.settings, which checks that no limit is set below it.


def max_binding_bytes() -> int:
    """The limit in force: the `max_binding_bytes` setting, else the WebGPU default."""
    limit = settings().max_binding_bytes
    return MAX_BINDING_BYTES if limit is None else limit


@contextmanager
def binding_limit(nbytes: int) -> Iterator[None]:
    """Plan with a binding limit of `nbytes` inside the block (tests use 64 KiB to split small tensors)."""
    with override(max_binding_bytes=nbytes):
        yield


@dataclass(frozen=True)
class Chunk:
    """Rows [first_row, first_row + rows) of an input, bound as bytes [offset, offset + size).

    A lone chunk with `size` None is the whole input bound as usual (it fits, or its size is symbolic
    and only the runtime can check it)."""

    offset: int
    size: int | None
    first_row: int
    rows: SymbolicDim


@dataclass(frozen=True)
class BufferRange:
    """A buffer bound from byte `offset`, `size` bytes long (None: to the end); see `PlanCtx.input_chunk`."""

    ref: BufferRef
    offset: SymbolicDim = 0
    size: SymbolicDim | None = None


def split_rows(rows: int, row_bytes: int, limit: int, where: str) -> list[Chunk]:
    """`rows` rows of `row_bytes` each in balanced ranges of at most `limit` bytes, aligned to 256."""
    if rows * row_bytes <= limit:
        return [Chunk(0, None, 0, rows)]
    step = BINDING_ALIGNMENT // math.gcd(row_bytes, BINDING_ALIGNMENT)  # rows per aligned unit
    most = limit // row_bytes // step * step
    if most == 0:
        raise PlanningError(
            f"{where}: rows are {row_bytes} bytes, so its smallest {BINDING_ALIGNMENT}-byte aligned range "
            f"({step} rows) exceeds the {limit}-byte storage binding limit"
        )
    count = -(-rows // most)
    per = -(-rows // count // step) * step  # as even as alignment allows, so no chunk is a sliver
    return [
        Chunk(first * row_bytes, min(per, rows - first) * row_bytes, first, min(per, rows - first))
        for first in range(0, rows, per)
    ]

"""The planning-time storage-binding limit, and the one way operators split a big input into ranges.

WebGPU caps a single storage binding (``maxStorageBufferBindingSize``, 128 MiB by default and on
lavapipe) far below the buffer size an adapter allows, and a real LLM's weights pass it: Gemma 3
270m's f32 tied embedding is 262144 x 640 = 671 MB. Operators that read such an input split their
work into one dispatch per range of rows (`PlanCtx.chunks`), each binding only its range. Ranges
start at multiples of `BINDING_ALIGNMENT`, the portable ``min-storage-buffer-offset-alignment``.

The limit is `MAX_BINDING_BYTES` unless the `max_binding_bytes` setting (``ONYXIA_MAX_BINDING_BYTES``,
`override`, or `binding_limit()` for a block) lowers it, which is how tests exercise the split with
small tensors.

A buffer has a limit too (``maxBufferSize``: 2 GiB on lavapipe), and Phi-4-mini's 200064 x 3072 f32
embedding (2.46 GB) passes it. A compile-time input over `max_buffer_bytes()` is therefore chunked in
pieces (`split_pieces`): row ranges each uploaded as its own buffer (`onyxia.core.weight_pieces`), every
binding chunk inside one piece, aligned from the piece's start.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from onyxia.core.errors import PlanningError
from onyxia.core.plan import BufferRef
from onyxia.core.settings import BINDING_ALIGNMENT, override, settings
from onyxia.core.symbolic import SymbolicDim

__all__ = [
    "BINDING_ALIGNMENT",
    "MAX_BINDING_BYTES",
    "MAX_BUFFER_BYTES",
    "BufferRange",
    "Chunk",
    "Piece",
    "binding_limit",
    "max_binding_bytes",
    "max_buffer_bytes",
    "split_pieces",
    "split_rows",
]

MAX_BINDING_BYTES = 128 << 20  # WebGPU's default maxStorageBufferBindingSize, and lavapipe's
# BINDING_ALIGNMENT (256) is the largest min-storage-buffer-offset-alignment WebGPU allows (lavapipe: 32);
# it lives in onyxia.core.settings, which checks that no limit is set below it.
MAX_BUFFER_BYTES = (1 << 31) - 256  # lavapipe's maxBufferSize (2 GiB - 1), floored to the alignment


def max_binding_bytes() -> int:
    """The limit in force: the `max_binding_bytes` setting, else the WebGPU default."""
    limit = settings().max_binding_bytes
    return MAX_BINDING_BYTES if limit is None else limit


def max_buffer_bytes() -> int:
    """The largest buffer a compile-time weight may occupy: the `max_buffer_bytes` setting, else lavapipe's."""
    limit = settings().max_buffer_bytes
    return MAX_BUFFER_BYTES if limit is None else limit


@contextmanager
def binding_limit(nbytes: int) -> Iterator[None]:
    """Plan with a binding limit of `nbytes` inside the block (tests use 64 KiB to split small tensors)."""
    with override(max_binding_bytes=nbytes):
        yield


@dataclass(frozen=True)
class Piece:
    """Rows [first_row, first_row + rows) of a weight over the buffer limit, held in a buffer of their own."""

    first_row: int
    rows: int
    row_bytes: int

    @property
    def offset(self) -> int:
        return self.first_row * self.row_bytes


@dataclass(frozen=True)
class Chunk:
    """Rows [first_row, first_row + rows) of an input, bound as bytes [offset, offset + size).

    A lone chunk with `size` None is the whole input bound as usual (it fits, or its size is symbolic
    and only the runtime can check it). With a `piece`, the rows live in that piece's buffer, from byte
    ``offset - piece.offset`` (`PlanCtx.input_chunk` binds it)."""

    offset: int
    size: int | None
    first_row: int
    rows: SymbolicDim
    piece: Piece | None = None

    def range_of(self, ref: BufferRef, row_bytes: int) -> BufferRange:
        """The same rows of another buffer `ref` whose rows are `row_bytes` long (an op binding several
        arrays row by row, chunked by `split_rows` with all their row sizes), its size rounded up to the
        4 bytes a binding needs (buffers are padded so)."""
        if self.size is None:
            return BufferRange(ref)
        assert isinstance(self.rows, int)
        return BufferRange(ref, self.first_row * row_bytes, -(-self.rows * row_bytes // 4) * 4)


@dataclass(frozen=True)
class BufferRange:
    """A buffer bound from byte `offset`, `size` bytes long (None: to the end); see `PlanCtx.input_chunk`."""

    ref: BufferRef
    offset: SymbolicDim = 0
    size: SymbolicDim | None = None


def split_rows(rows: int, row_bytes: int | Sequence[int], limit: int, where: str) -> list[Chunk]:
    """`rows` rows of `row_bytes` each in balanced ranges of at most `limit` bytes, aligned to 256.

    Several row sizes: arrays chunked together by the same rows (GatherBlockQuantized's data and scales),
    each range within the limit and aligned in every array; offsets and sizes are the first array's
    (`Chunk.range_of` gives the others')."""
    sizes = [row_bytes] if isinstance(row_bytes, int) else list(row_bytes)
    if all(rows * size <= limit for size in sizes):
        return [Chunk(0, None, 0, rows)]
    step = math.lcm(*(BINDING_ALIGNMENT // math.gcd(size, BINDING_ALIGNMENT) for size in sizes))  # aligned unit
    most = min(limit // size for size in sizes) // step * step
    if most == 0:
        raise PlanningError(
            f"{where}: rows are {' + '.join(map(str, sizes))} bytes, so its smallest {BINDING_ALIGNMENT}-byte aligned "
            f"range ({step} rows) exceeds the {limit}-byte storage binding limit"
        )
    return [Chunk(first * sizes[0], count * sizes[0], first, count) for first, count in _balanced(rows, most, step)]


def split_pieces(rows: int, row_bytes: int, binding: int, buffer: int, where: str) -> list[Chunk]:
    """`split_rows` of a weight over the `buffer` limit: first pieces of at most `buffer` bytes, each its own
    buffer, then each piece's rows in binding ranges aligned from the piece's start."""
    most = min(buffer, rows * row_bytes) // row_bytes
    if most == 0:
        raise PlanningError(f"{where}: rows are {row_bytes} bytes, over the {buffer}-byte buffer limit")
    chunks: list[Chunk] = []
    for first, count in _balanced(rows, most, 1):
        piece = Piece(first, count, row_bytes)
        for chunk in split_rows(count, row_bytes, min(binding, buffer), where):
            size = chunk.size if chunk.size is not None else count * row_bytes
            offset = piece.offset + chunk.offset
            chunks.append(Chunk(offset, size, first + chunk.first_row, chunk.rows, piece))
    return chunks


def _balanced(rows: int, most: int, step: int) -> list[tuple[int, int]]:
    """(first, count) ranges covering `rows`, at most `most` rows each, as even as multiples of `step`
    allow, so no range is a sliver."""
    count = -(-rows // most)
    per = -(-rows // count // step) * step
    return [(first, min(per, rows - first)) for first in range(0, rows, per)]

"""Binding packed 4-bit data to a shader as u32 words, 8 nibbles per word, never one byte per u32.

The GPU storage form of a uint8 tensor widens every byte to a u32 (`DataType.gpu_numpy`), which
would quadruple the bytes a decode step streams for MatMulNBits' weights. So when the packed data
is known at compile time (an initializer, or a folded value such as the genai builder's Reshape of
the tied embedding), the op binds a derived constant holding the same bytes reinterpreted as
little-endian u32 words; the repack runs lazily, when the runtime uploads the weight. Data that is
only known at run time is bound as the graph stores it, and the shader reads it through
``#ifdef ..._WIDENED`` (uint8: one byte per u32; INT4/UINT4 tensors stay packed bytes on the GPU).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from onyxia.core import BufferRef, DataType, PlanCtx, TensorValue
from onyxia.core.nibbles import pack_4bit

__all__ = ["PackedInput", "bind_packed", "u32_words"]


class PackedInput(NamedTuple):
    buffer: BufferRef
    widened: bool  # one byte per u32 (a runtime uint8 tensor) instead of 4 bytes per word
    known: bool  # the data is known at compile time (repacked into a constant)


def u32_words(source: TensorValue | np.ndarray, name: str, columns: int = 0, pad: int = 4) -> TensorValue:
    """`source`'s bytes as a lazy 1-D UINT32 value (zero-padded to whole words).

    With `columns`, `source` holds `columns` equal rows of whole words, stored in column panels instead:
    the columns zero-padded to a multiple of `pad`, then [panels, words, pad] (word-major within a panel of
    `pad` columns), so a thread reads word w of four neighbouring columns as one vec4<u32>, neighbouring
    threads read neighbouring vec4s, and the threads of one panel stream it front to back.
    """
    words = (source.nbytes + 3) // 4
    padded_columns = -(-columns // pad) * pad
    size = words // columns * padded_columns if columns else words

    def load() -> np.ndarray:
        data = source.numpy() if isinstance(source, TensorValue) else source
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        flat = np.zeros(words * 4, np.uint8)
        flat[: raw.size] = raw
        if isinstance(source, TensorValue):
            source.release()  # only the repacked copy goes to the GPU; the source may be a mapped file
        packed = flat.view("<u4")
        if not columns:
            return packed
        out = np.zeros((padded_columns, words // columns), np.uint32)
        out[:columns] = packed.reshape(columns, -1)
        return np.ascontiguousarray(out.reshape(padded_columns // pad, pad, -1).transpose(0, 2, 1)).reshape(-1)

    return TensorValue(DataType.UINT32, (size,), load, name=name)


def bind_packed(ctx: PlanCtx, i: int, columns: int = 0, pad: int = 4) -> PackedInput:
    """Input `i` (4-bit values packed two per byte) as u32 words when known at compile time,
    in column panels by `columns` (see `u32_words`); else as the graph stores it."""
    tensor = ctx.input_tensor(i)
    source = tensor.initializer if tensor.initializer is not None else tensor.value
    if source is None or (isinstance(source, np.ndarray) and source.dtype == object):
        return PackedInput(ctx.input(i), tensor.dtype == DataType.UINT8, False)
    if isinstance(source, np.ndarray) and tensor.dtype.is_packed:  # a folded int4/uint4 value holds logical values
        source = pack_4bit(source)
    key = f"{tensor.name}:u32" + (f":panels-{pad}-of-{columns}" if columns else "")
    return PackedInput(ctx.constant(key, u32_words(source, key, columns, pad)), False, True)

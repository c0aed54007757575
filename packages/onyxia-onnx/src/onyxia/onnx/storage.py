"""How ONNX stores one tensor's elements: the numpy dtype of a stored element and how many there are.

Inline data (`onyxia.onnx.tensors`) and external data (`onyxia.onnx.external`) both size and view
raw bytes by these rules, so they live below both: 4-bit types stay packed bytes (two values per
byte, low nibble first), bfloat16 stays uint16 bit patterns and float8 stays uint8, because numpy
has no such dtypes and the GPU side unpacks them anyway.
"""

from __future__ import annotations

import numpy as np

from onyxia.core.dtypes import DataType

__all__ = ["BYTE_FLOATS", "PACKED_4BIT", "storage_count", "storage_dtype"]

PACKED_4BIT = frozenset({DataType.UINT4, DataType.INT4, DataType.FLOAT4E2M1})
BYTE_FLOATS = frozenset({DataType.FLOAT8E4M3FN, DataType.FLOAT8E4M3FNUZ, DataType.FLOAT8E5M2, DataType.FLOAT8E5M2FNUZ})


def storage_dtype(dtype: DataType) -> np.dtype:
    """Little-endian numpy dtype of one stored element, as ONNX lays it out in raw_data."""
    if dtype in PACKED_4BIT or dtype in BYTE_FLOATS:
        return np.dtype("<u1")
    if dtype is DataType.BFLOAT16:
        return np.dtype("<u2")
    return dtype.numpy.newbyteorder("<")


def storage_count(dtype: DataType, dims: tuple[int, ...]) -> int:
    """Stored elements for `dims`: two 4-bit values share a byte."""
    numel = int(np.prod(dims, dtype=np.int64))
    return (numel + 1) // 2 if dtype in PACKED_4BIT else numel

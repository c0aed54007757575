"""Strides and dtype defs shared by every operator that indexes tensors in a shader.

Strides are dim expressions (ints or `SymbolicExpr`), so the same helper serves static and
symbolic shapes; planning turns them into literals or immediates.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from onyxia.core import DataType, SymbolicDim
from onyxia.core.shapes import dims_product

__all__ = ["WORKGROUP_SIZE", "broadcast_strides", "contiguous_strides", "type_defs", "wgsl_literal"]

WORKGROUP_SIZE = 256


def contiguous_strides(dims: Sequence[SymbolicDim]) -> list[SymbolicDim]:
    """Row-major strides in elements."""
    return [dims_product(dims[i + 1 :]) for i in range(len(dims))]


def broadcast_strides(in_dims: Sequence[SymbolicDim], out_dims: Sequence[SymbolicDim]) -> list[SymbolicDim]:
    """Strides of an input read at output coordinates: 0 along axes it is broadcast over."""
    padded = [1] * (len(out_dims) - len(in_dims)) + list(in_dims)
    strides = contiguous_strides(padded)
    return [0 if d == 1 and o != 1 else s for d, o, s in zip(padded, out_dims, strides)]


def type_defs(**dtypes: DataType) -> dict[str, object]:
    """``A_T="f32"``-style defs for the storage types, plus ``F16`` when any of them is f16."""
    defs: dict[str, object] = {name: dtype.wgsl for name, dtype in dtypes.items()}
    if any(dtype == DataType.FLOAT16 for dtype in dtypes.values()):
        defs["F16"] = True
    return defs


def wgsl_literal(dtype: DataType, value: float | int) -> str:
    """`value` as a WGSL expression of `dtype`'s storage type, rounded to the dtype first.

    WGSL has no inf or NaN literal, and a finite literal the type cannot hold (``f16(1e38)``) is a
    compile error, so non-finite floats are f32 bit patterns (naga has no 16-bit bitcast; f16 converts
    the f32 infinity or NaN).
    """
    if dtype == DataType.BOOL:
        return f"{int(bool(value))}u"
    if not dtype.is_float:
        return f"{dtype.wgsl}({int(value)})"
    rounded = np.float16(value) if dtype == DataType.FLOAT16 else np.float32(value)
    if np.isfinite(rounded):
        return f"{dtype.wgsl}({float(rounded)!r})"
    return f"{dtype.wgsl}(bitcast<f32>({int(np.float32(rounded).view(np.uint32))}u))"

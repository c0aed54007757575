"""int4/uint4 on the host: ONNX's packed storage form <-> logical values, and casts into 4 bits.

Two host forms exist, and each place uses exactly one. A `TensorValue` (an initializer, a constant
an op derives) holds ONNX *storage*: flat bytes, two values per byte, low nibble first, an odd count
padded with a zero nibble, which is also the GPU storage form (`DataType.is_packed`). Everything that
computes on values (folding, `tensor.value`, `run()` inputs and outputs) holds *logical* values: an
int8 (INT4) or uint8 (UINT4) array of the tensor's shape, each element in [-8, 7] or [0, 15].

Casting into 4 bits follows onnxruntime, the project's oracle, where the ONNX spec leaves room: an
integer keeps its low 4 bits (the spec's "discard higher bits"; int32 300 -> int4 -4), and a float is
rounded half away from zero first (std::round; 2.5 -> 3), then wrapped the same way (7.6 -> -8);
the spec calls out-of-range floats undefined.
"""

from __future__ import annotations

import numpy as np

from onyxia.core.dtypes import DataType
from onyxia.core.errors import PlanningError

__all__ = ["host_values", "pack_4bit", "to_4bit", "unpack_4bit", "wrap_4bit"]


def unpack_4bit(packed: np.ndarray, dtype: DataType, dims: tuple[int, ...]) -> np.ndarray:
    """Logical values (int8 for INT4, uint8 for UINT4, shaped `dims`) of ONNX-packed bytes."""
    numel = int(np.prod(dims, dtype=np.int64))
    raw = np.ascontiguousarray(packed).reshape(-1).view(np.uint8)
    if raw.size != (numel + 1) // 2:
        raise PlanningError(
            f"{dtype.name} data of shape {list(dims)} holds {raw.size} bytes; expected {(numel + 1) // 2} (two per byte)"
        )
    nibbles = np.empty(raw.size * 2, np.uint8)
    nibbles[0::2], nibbles[1::2] = raw & 0x0F, raw >> 4
    return wrap_4bit(nibbles[:numel], dtype).reshape(dims)


def pack_4bit(values: np.ndarray) -> np.ndarray:
    """Flat ONNX storage bytes (low nibble first) of logical 4-bit `values`; only the low 4 bits count."""
    flat = np.asarray(values).reshape(-1).astype(np.int64) & 0x0F
    if flat.size % 2:
        flat = np.append(flat, 0)
    return (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8)


def wrap_4bit(values: np.ndarray, dtype: DataType) -> np.ndarray:
    """The low 4 bits of integer `values` as `dtype`'s logical values (sign-extended for INT4)."""
    low = np.asarray(values).astype(np.int64) & 0x0F
    if dtype is DataType.INT4:
        return np.where(low >= 8, low - 16, low).astype(np.int8)
    return low.astype(np.uint8)


def to_4bit(values: np.ndarray, dtype: DataType) -> np.ndarray:
    """Cast `values` to `dtype` (INT4/UINT4) as onnxruntime does: see the module docstring."""
    values = np.asarray(values)
    if values.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            finite = np.nan_to_num(values.astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)
            rounded = np.sign(finite) * np.floor(np.abs(finite) + 0.5)
            values = np.clip(rounded, -(2.0**31), 2.0**31 - 1)
    return wrap_4bit(values, dtype)


def host_values(dtype: DataType, dims: tuple[int, ...], stored: np.ndarray) -> np.ndarray:
    """`stored` (a `TensorValue`'s storage-form data) as logical values: unpacked for 4-bit types."""
    return unpack_4bit(stored, dtype, dims) if dtype.is_packed else np.asarray(stored)

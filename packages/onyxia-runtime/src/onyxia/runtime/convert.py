"""Host <-> GPU element conversion: the one place the storage forms of `DataType.gpu_numpy` apply.

WGSL has no 64-bit or sub-32-bit integers, so int64 travels as i32, uint64 as u32, bool as u32 and
the 8/16-bit integers widen to 32 bits. Narrowing int64 and uint64 is checked, never wrapped: a token
id or a shape value beyond 32 bits would silently compute garbage. int4/uint4 stay packed two per byte on the GPU
(`onyxia.core.nibbles`): weights arrive packed already, while `run()` takes and returns logical
values as `ml_dtypes.int4`/`uint4` arrays (what `onnx.numpy_helper` uses; plain int8/uint8 arrays
in range are accepted too), packed on the way in and unpacked on the way out. float64 is demoted to
float32 on the way in (IEEE rounding: a magnitude beyond float32's range becomes infinite) and
widened back on the way out, so callers see the declared dtype (`DataType.is_demoted`).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from onyxia.core.dtypes import DataType
from onyxia.core.errors import OnyxiaError
from onyxia.core.nibbles import pack_4bit, unpack_4bit

__all__ = ["PACKED_TYPES", "from_gpu", "pack_input", "padded_nbytes", "storage_bytes", "to_gpu"]

PACKED_TYPES = frozenset({DataType.UINT4, DataType.INT4})
_CARRIED_RANGE = {DataType.INT64: np.iinfo(np.int32), DataType.UINT64: np.iinfo(np.uint32)}  # 64 bits in 32


def padded_nbytes(nbytes: int) -> int:
    """Buffer bytes for `nbytes` of data: WebGPU copies and bindings work in 4-byte units, and a
    zero-size tensor still needs a real (4-byte) buffer to bind."""
    return max(4, (nbytes + 3) // 4 * 4)


_LOGICAL_4BIT = {DataType.INT4: np.dtype(ml_dtypes.int4), DataType.UINT4: np.dtype(ml_dtypes.uint4)}
_RANGE_4BIT = {DataType.INT4: (-8, 7), DataType.UINT4: (0, 15)}


def pack_input(where: str, dtype: DataType, array: np.ndarray, error: type[OnyxiaError]) -> np.ndarray:
    """Packed storage bytes of a logical int4/uint4 input: `ml_dtypes` 4-bit values, or 8-bit integers
    of the 4-bit range (checked, never wrapped, like int64 inputs)."""
    plain = np.int8 if dtype is DataType.INT4 else np.uint8
    if array.dtype not in (_LOGICAL_4BIT[dtype], np.dtype(plain)):
        raise error(f"{where}: dtype is {array.dtype}; expected ml_dtypes.{dtype.name.lower()} (or {np.dtype(plain)})")
    values = array.astype(np.int8 if dtype is DataType.INT4 else np.uint8)
    lo, hi = _RANGE_4BIT[dtype]
    if values.size and (int(values.min()) < lo or int(values.max()) > hi):
        raise error(
            f"{where}: values range over [{int(values.min())}, {int(values.max())}]; {dtype.name} holds [{lo}, {hi}]"
        )
    return pack_4bit(values)


def to_gpu(where: str, dtype: DataType, array: np.ndarray, error: type[OnyxiaError]) -> np.ndarray:
    """`array` in the GPU storage form of `dtype`, C-contiguous; `where` names the tensor in errors.
    For int4/uint4, `array` is already that form (a weight's packed bytes; inputs go through `pack_input`)."""
    if dtype in PACKED_TYPES:
        return np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    target = dtype.gpu_numpy
    info = _CARRIED_RANGE.get(dtype)
    if info is not None and array.size:
        lo, hi = int(array.min()), int(array.max())
        if lo < info.min or hi > info.max:
            kind = dtype.name.lower()
            raise error(
                f"{where}: {kind} values range over [{lo}, {hi}]; the GPU stores {kind} as {info.dtype}, "
                f"so every value must lie in [{info.min}, {info.max}]"
            )
    if array.dtype == target:
        return np.ascontiguousarray(array)
    if array.dtype.kind != "f":  # integers narrowed after the range check above (a decode step's few feeds)
        return np.ascontiguousarray(array.astype(target))
    with np.errstate(over="ignore"):  # float64 -> float32 overflow to infinity is the documented rounding
        return np.ascontiguousarray(array.astype(target))


def storage_bytes(array: np.ndarray) -> np.ndarray:
    """`array`'s bytes (as uint8, no copy when contiguous) padded to a multiple of 4 (odd-length f16
    data), as `queue.write_buffer` needs."""
    data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    if data.size % 4 == 0:
        return data
    return np.concatenate([data, np.zeros(4 - data.size % 4, np.uint8)])


def from_gpu(dtype: DataType, raw: memoryview | bytes, offset: int, shape: tuple[int, ...]) -> np.ndarray:
    """The logical array for `shape` read at `offset` of a mapped staging copy."""
    numel = int(np.prod(shape, dtype=np.int64))
    if dtype in PACKED_TYPES:
        packed = np.frombuffer(raw, np.uint8, (numel + 1) // 2, offset)
        return unpack_4bit(packed, dtype, shape).astype(_LOGICAL_4BIT[dtype])
    stored = np.frombuffer(raw, dtype.gpu_numpy, numel, offset)
    if dtype == DataType.BOOL:
        return stored.astype(np.bool_).reshape(shape)  # nonzero words are True
    return stored.astype(dtype.numpy).reshape(shape)  # astype copies, so the result owns its memory

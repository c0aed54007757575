"""Tensor element types: the ONNX codes, and how each one lives on a WebGPU device.

WGSL has 32-bit scalars and (with `shader-f16`) f16, nothing narrower or wider. So every dtype has
a *storage* form on the GPU: int64 travels as i32 and uint64 as u32 (range-checked when uploaded,
and by the checked kernels where arithmetic could leave that range: never wrapped), bool and the 8/16-bit integers widen to 32 bits, and int4/uint4 stay packed two per byte, low
nibble first, exactly as ONNX stores them (read as u32 words of 8 nibbles): the 4-bit weights
MatMulNBits and GatherBlockQuantized stream keep their on-disk size, and the few ops that compute
on 4-bit values (Cast, QuantizeLinear, DequantizeLinear) unpack or pack them themselves
(`onyxia.core.nibbles` has the host side). float64 is *demoted*: carried as f32 on the GPU (rounded
when uploaded, widened back when read), so a float64 model runs and returns float64 arrays, but with
float32 precision and range; `DataType.is_demoted` marks such types so plans can say so
(`CompiledModel.demoted`). Folding on the host still computes in float64. Types with no WGSL form
(bfloat16, float8, string, complex) are rejected at compile time by `require_gpu_type`.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

import numpy as np

from onyxia.core.errors import PlanningError

__all__ = ["FLOAT_TYPES", "INT_TYPES", "PACKED_4BIT", "DataType", "DemotionWarning", "require_gpu_type"]


class DemotionWarning(UserWarning):
    """A compiled plan computes some tensors less precisely than declared (`CompiledModel.demoted`)."""


class DataType(enum.IntEnum):
    """Exactly ONNX `TensorProto.DataType` codes, so conversion is `DataType(code)`."""

    UNDEFINED = 0
    FLOAT = 1
    UINT8 = 2
    INT8 = 3
    UINT16 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    STRING = 8
    BOOL = 9
    FLOAT16 = 10
    DOUBLE = 11
    UINT32 = 12
    UINT64 = 13
    COMPLEX64 = 14
    COMPLEX128 = 15
    BFLOAT16 = 16
    FLOAT8E4M3FN = 17
    FLOAT8E4M3FNUZ = 18
    FLOAT8E5M2 = 19
    FLOAT8E5M2FNUZ = 20
    UINT4 = 21
    INT4 = 22
    FLOAT4E2M1 = 23

    # ----- host side ----------------------------------------------------------------------
    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype used for host values (folding, inputs, outputs)."""
        if self not in _NUMPY:
            raise PlanningError(f"dtype {self.name} has no numpy representation in Onyxia")
        return np.dtype(_NUMPY[self])

    @property
    def itemsize(self) -> int:
        """Bytes per element in ONNX storage (4-bit types report 1: two share a byte)."""
        return 1 if self in (DataType.UINT4, DataType.INT4) else self.numpy.itemsize

    @staticmethod
    def from_numpy(dtype: np.dtype | type) -> DataType:
        dt = np.dtype(dtype)
        for key, value in _NUMPY.items():
            if np.dtype(value) == dt and key not in (DataType.UINT4, DataType.INT4):
                return key
        raise PlanningError(f"numpy dtype {dt} has no ONNX counterpart supported by Onyxia")

    @property
    def is_float(self) -> bool:
        return self in FLOAT_TYPES

    @property
    def is_integer(self) -> bool:
        return self in INT_TYPES

    # ----- GPU side -----------------------------------------------------------------------
    @property
    def has_gpu_type(self) -> bool:
        return self in _GPU

    @property
    def wgsl(self) -> str:
        """WGSL scalar type of one stored element (``u32`` for packed 4-bit words)."""
        return _GPU[self].wgsl

    @property
    def gpu_numpy(self) -> np.dtype:
        """numpy dtype of the GPU storage form (int64 -> int32, uint64 -> uint32, bool -> uint32,
        float64 -> float32 ...)."""
        return np.dtype(_GPU[self].numpy)

    @property
    def is_demoted(self) -> bool:
        """Whether the GPU form loses precision, not only range (float64 as f32): results are approximate."""
        return self in _GPU and _GPU[self].demoted

    @property
    def is_packed(self) -> bool:
        """int4/uint4: stored two per byte (ONNX storage and the GPU form); values computed on the host are
        unpacked, one per int8/uint8 (`onyxia.core.nibbles`)."""
        return self in PACKED_4BIT

    @property
    def short(self) -> str:
        return _SHORT.get(self, self.name.lower())


PACKED_4BIT = frozenset({DataType.INT4, DataType.UINT4})
FLOAT_TYPES = frozenset({DataType.FLOAT, DataType.FLOAT16, DataType.DOUBLE, DataType.BFLOAT16})
INT_TYPES = frozenset(
    {
        DataType.UINT8,
        DataType.INT8,
        DataType.UINT16,
        DataType.INT16,
        DataType.INT32,
        DataType.INT64,
        DataType.UINT32,
        DataType.UINT64,
    }
)

_NUMPY: dict[DataType, type] = {
    DataType.FLOAT: np.float32,
    DataType.UINT8: np.uint8,
    DataType.INT8: np.int8,
    DataType.UINT16: np.uint16,
    DataType.INT16: np.int16,
    DataType.INT32: np.int32,
    DataType.INT64: np.int64,
    DataType.BOOL: np.bool_,
    DataType.FLOAT16: np.float16,
    DataType.DOUBLE: np.float64,
    DataType.UINT32: np.uint32,
    DataType.UINT64: np.uint64,
    DataType.COMPLEX64: np.complex64,
    DataType.COMPLEX128: np.complex128,
    DataType.STRING: np.object_,
    DataType.UINT4: np.uint8,
    DataType.INT4: np.int8,
}


class _Storage(NamedTuple):
    """How one dtype lives on the GPU."""

    wgsl: str  # WGSL element type
    numpy: type  # numpy dtype of the buffer's elements
    demoted: bool = False  # precision is lost (not only range, as int64's is checked): results are approximate


_GPU: dict[DataType, _Storage] = {
    DataType.FLOAT: _Storage("f32", np.float32),
    DataType.FLOAT16: _Storage("f16", np.float16),
    DataType.DOUBLE: _Storage("f32", np.float32, demoted=True),  # WGSL has no f64
    DataType.INT32: _Storage("i32", np.int32),
    DataType.INT64: _Storage("i32", np.int32),  # range-checked at upload and by the checked kernels
    DataType.UINT32: _Storage("u32", np.uint32),
    DataType.UINT64: _Storage("u32", np.uint32),  # values below 2^32, checked like int64's
    DataType.BOOL: _Storage("u32", np.uint32),
    DataType.INT8: _Storage("i32", np.int32),
    DataType.INT16: _Storage("i32", np.int32),
    DataType.UINT8: _Storage("u32", np.uint32),
    DataType.UINT16: _Storage("u32", np.uint32),
    DataType.INT4: _Storage("u32", np.uint8),  # packed bytes, bound as u32 words of 8 nibbles (see the docstring)
    DataType.UINT4: _Storage("u32", np.uint8),
}

_SHORT = {
    DataType.FLOAT: "f32",
    DataType.FLOAT16: "f16",
    DataType.DOUBLE: "f64",
    DataType.INT32: "i32",
    DataType.INT64: "i64",
    DataType.UINT32: "u32",
    DataType.UINT64: "u64",
    DataType.UINT8: "u8",
    DataType.INT8: "i8",
    DataType.BOOL: "bool",
    DataType.INT4: "i4",
    DataType.UINT4: "u4",
}


def require_gpu_type(dtype: DataType, where: str) -> None:
    """Reject, at compile time, a dtype WebGPU cannot store; `where` names the tensor."""
    if not dtype.has_gpu_type:
        raise PlanningError(
            f"{where}: dtype {dtype.name} has no WebGPU storage type "
            "(supported: float32, float16, float64 as f32, int64 as i32, uint64 as u32, int32, uint32, "
            "int8/uint8/int16/uint16, bool, "
            "packed int4/uint4)"
        )

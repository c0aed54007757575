"""`TensorProto` <-> `TensorValue`: inline data here, external data delegated to `ExternalDataStore`.

Every tensor is kept in its ONNX *storage* form (`onyxia.onnx.storage`, shared with the external
data reader) so nothing is reinterpreted on load: 4-bit types stay packed bytes (flat uint8, low
nibble first), bfloat16 stays uint16 bit patterns and float8 stays uint8. Sizes are
checked against the dims up front, so a short tensor fails at load time naming the tensor rather
than deep inside an operator.
"""

from __future__ import annotations

import numpy as np

import onnx
from onnx import numpy_helper
from onyxia.core.dtypes import DataType
from onyxia.core.errors import OnyxiaError
from onyxia.core.values import TensorValue
from onyxia.onnx.errors import OnnxError
from onyxia.onnx.external import ExternalDataStore
from onyxia.onnx.storage import BYTE_FLOATS, PACKED_4BIT, storage_count, storage_dtype

__all__ = ["read_tensor", "tensor_proto", "to_datatype"]


def to_datatype(code: int, where: str) -> DataType:
    """The `DataType` of an ONNX element-type code; unknown and UNDEFINED codes are load errors."""
    try:
        dtype = DataType(code)
    except ValueError:
        dtype = None
    if dtype is None or dtype is DataType.UNDEFINED:
        raise OnnxError(
            f"{where}: unknown dtype code {code}; expected an ONNX TensorProto.DataType code from 1 to {max(DataType)}"
        )
    return dtype


def read_tensor(proto: onnx.TensorProto, where: str, store: ExternalDataStore) -> TensorValue:
    """A `TensorValue` for `proto`; external data stays on disk until the value is read."""
    dtype = to_datatype(proto.data_type, where)
    dims = tuple(int(d) for d in proto.dims)
    if any(d < 0 for d in dims):
        raise OnnxError(f"{where}: negative dim in shape {list(dims)}")
    if proto.HasField("segment"):
        raise OnnxError(f"{where}: segmented tensors are not supported")
    name = proto.name
    if proto.data_location == onnx.TensorProto.EXTERNAL:
        return store.lazy_value(proto, dtype, dims, where)
    if proto.HasField("raw_data"):
        return TensorValue(dtype, dims, _from_raw(proto.raw_data, dtype, dims, where), name=name)
    return TensorValue(dtype, dims, _from_fields(proto, dtype, dims, where), name=name)


def _shaped(flat: np.ndarray, dtype: DataType, dims: tuple[int, ...]) -> np.ndarray:
    return flat if dtype in PACKED_4BIT else flat.reshape(dims)


def _from_raw(raw: bytes, dtype: DataType, dims: tuple[int, ...], where: str) -> np.ndarray:
    if dtype is DataType.STRING:
        raise OnnxError(f"{where}: a STRING tensor cannot use raw_data; expected string_data")
    storage = storage_dtype(dtype)
    needed = storage_count(dtype, dims) * storage.itemsize
    if len(raw) != needed:
        raise OnnxError(
            f"{where}: raw_data holds {len(raw)} bytes, but shape {list(dims)} of {dtype.name} needs {needed} bytes"
        )
    return _shaped(np.frombuffer(raw, dtype=storage), dtype, dims)


def _from_fields(proto: onnx.TensorProto, dtype: DataType, dims: tuple[int, ...], where: str) -> np.ndarray:
    """Typed fields (float_data, int32_data, ...): numpy_helper knows the numpy types; the rest are bit patterns."""
    field = onnx.helper.tensor_dtype_to_field(int(dtype))
    values = getattr(proto, field)
    expected = storage_count(dtype, dims) * (2 if dtype in (DataType.COMPLEX64, DataType.COMPLEX128) else 1)
    if len(values) != expected:
        raise OnnxError(
            f"{where}: {field} holds {len(values)} values, but shape {list(dims)} of {dtype.name} needs {expected}"
        )
    if dtype in PACKED_4BIT or dtype in BYTE_FLOATS or dtype is DataType.BFLOAT16:
        # int32_data carries one stored element (a packed byte or a 16-bit pattern) per entry
        bits = np.asarray(values, dtype=np.int32).view(np.uint32).astype(storage_dtype(dtype))
        return _shaped(bits, dtype, dims)
    try:
        return numpy_helper.to_array(proto)
    except Exception as e:
        raise OnnxError(f"{where}: cannot decode {field}: {type(e).__name__}: {e}") from e


def tensor_proto(name: str, dtype: DataType, dims: tuple[int, ...], array: np.ndarray, where: str) -> onnx.TensorProto:
    """Inline `TensorProto` from storage-form data (the inverse of `read_tensor`)."""
    proto = onnx.TensorProto(data_type=int(dtype), dims=list(dims))
    if name:  # proto2 tracks presence: an unnamed attribute tensor must stay unnamed to compare equal
        proto.name = name
    array = np.asarray(array)
    if dtype is DataType.STRING:
        proto.string_data.extend(str(s).encode("utf-8") for s in array.flat)
        return proto
    try:
        stored = np.ascontiguousarray(array, dtype=storage_dtype(dtype))
    except (OnyxiaError, TypeError, ValueError) as e:
        raise OnnxError(f"{where}: cannot store a {array.dtype} array as {dtype.name}: {e}") from e
    if stored.size != storage_count(dtype, dims):
        raise OnnxError(
            f"{where}: data has {stored.size} stored elements, but shape {list(dims)} of {dtype.name} "
            f"needs {storage_count(dtype, dims)}"
        )
    proto.raw_data = stored.tobytes()
    return proto

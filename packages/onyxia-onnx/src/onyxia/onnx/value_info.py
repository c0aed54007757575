"""`ValueInfoProto` <-> (DataType, TensorShape) for graph inputs, outputs and dumped intermediates.

Exporters write dims as free strings (``past_sequence_length + 1``, ``Addpast_key_values.0_dim_2``,
``batch:0``). Ones that parse become expressions shape inference can combine; the rest stay one
opaque name each, spelled exactly as in the file, so symbols still line up across inputs. A dim
with neither a value nor a name still needs an identity: it gets a fresh ``unk__<tensor>_<axis>``.
"""

from __future__ import annotations

import onnx
from onyxia.core.dtypes import DataType
from onyxia.core.errors import SymbolicError
from onyxia.core.shapes import Absent, TensorShape, shape_of
from onyxia.core.symbolic import SymbolicDim, SymbolicExpr
from onyxia.onnx.errors import OnnxError
from onyxia.onnx.tensors import to_datatype

__all__ = ["make_value_info", "parse_dim", "read_value_info"]


def parse_dim(dim: onnx.TensorShapeProto.Dimension, tensor: str, axis: int) -> SymbolicDim:
    if dim.HasField("dim_value"):
        return int(dim.dim_value)
    if dim.HasField("dim_param") and dim.dim_param.strip():
        try:
            return SymbolicExpr.parse(dim.dim_param)
        except SymbolicError:
            return SymbolicExpr.name(dim.dim_param)
    return SymbolicExpr.name(f"unk__{tensor}_{axis}")


def read_value_info(info: onnx.ValueInfoProto, where: str) -> tuple[DataType, TensorShape]:
    """dtype and shape of a tensor-typed value; a missing shape (unknown rank) is an error."""
    kind = info.type.WhichOneof("value")
    if kind != "tensor_type":
        raise OnnxError(f"{where}: has type '{kind or 'none'}'; only tensor types are supported")
    tensor_type = info.type.tensor_type
    dtype = to_datatype(tensor_type.elem_type, where)
    if not tensor_type.HasField("shape"):
        raise OnnxError(f"{where}: has no shape (unknown rank); expected a shape with one entry per axis")
    dims = [parse_dim(d, info.name, axis) for axis, d in enumerate(tensor_type.shape.dim)]
    try:
        return dtype, shape_of(dims)
    except ValueError as e:
        raise OnnxError(f"{where}: {e}") from e


def make_value_info(name: str, dtype: DataType, shape: TensorShape) -> onnx.ValueInfoProto:
    """A tensor `ValueInfoProto`; symbolic dims become their printed expression, Absent means no shape."""
    if isinstance(shape, Absent):
        return onnx.helper.make_tensor_value_info(name, int(dtype), None)
    dims: list[int | str] = [d if isinstance(d, int) else str(d) for d in shape.dims]
    info = onnx.helper.make_tensor_value_info(name, int(dtype), dims)
    info.type.tensor_type.shape.SetInParent()  # a rank-0 shape must still be present, or it reads as unknown rank
    return info

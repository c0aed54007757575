"""Node attributes: `AttributeProto` <-> plain Python values, and back.

Operators read attributes as ints, floats, strs, lists and `TensorValue`s, never protobuf. Going
back, the Python type alone is ambiguous (an empty list, or ``alpha=1`` set by a pass where the
spec wants a float), so the op's schema decides the type when onnx knows the op; contrib ops
(com.microsoft) fall back to the Python type.
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

import onnx
from onnx import AttributeProto
from onyxia.core.dtypes import DataType
from onyxia.core.values import TensorValue
from onyxia.onnx.errors import OnnxError
from onyxia.onnx.tensors import tensor_proto

__all__ = ["make_attribute", "read_attribute", "schema_attribute_types"]

TensorReader = Callable[[onnx.TensorProto, str], TensorValue]
GraphReader = Callable[[onnx.GraphProto, str], Any]  # a subgraph (If branch, Loop body) -> its IrGraph

_UNSUPPORTED = {
    AttributeProto.GRAPHS: "lists of subgraphs are not supported (no standard op takes one)",
    AttributeProto.SPARSE_TENSOR: "sparse tensors are not supported",
    AttributeProto.SPARSE_TENSORS: "sparse tensors are not supported",
    AttributeProto.TYPE_PROTO: "type-proto attributes are not supported",
    AttributeProto.TYPE_PROTOS: "type-proto attributes are not supported",
}


def read_attribute(
    attr: AttributeProto, where: str, read_tensor: TensorReader, read_graph: GraphReader | None = None
) -> Any:
    """The Python value of `attr`; `read_tensor` turns TENSOR payloads (maybe external) into values,
    `read_graph` GRAPH payloads into IR graphs (without it a subgraph is refused)."""
    kind = attr.type
    if kind == AttributeProto.GRAPH and read_graph is not None:
        return read_graph(attr.g, f"{where}: attribute '{attr.name}'")
    if kind == AttributeProto.GRAPH:
        raise OnnxError(f"{where}: attribute '{attr.name}' is GRAPH; subgraphs are not supported here")
    if kind in _UNSUPPORTED:
        raise OnnxError(
            f"{where}: attribute '{attr.name}' is {AttributeProto.AttributeType.Name(kind)}; {_UNSUPPORTED[kind]}"
        )
    if kind == AttributeProto.INT:
        return int(attr.i)
    if kind == AttributeProto.FLOAT:
        return float(attr.f)
    if kind == AttributeProto.STRING:
        return _decode(attr.s)
    if kind == AttributeProto.INTS:
        return [int(v) for v in attr.ints]
    if kind == AttributeProto.FLOATS:
        return [float(v) for v in attr.floats]
    if kind == AttributeProto.STRINGS:
        return [_decode(v) for v in attr.strings]
    if kind == AttributeProto.TENSOR:
        return read_tensor(attr.t, f"{where}: attribute '{attr.name}'")
    if kind == AttributeProto.TENSORS:
        return [read_tensor(t, f"{where}: attribute '{attr.name}'[{i}]") for i, t in enumerate(attr.tensors)]
    raise OnnxError(f"{where}: attribute '{attr.name}' has unknown attribute type code {kind}")


def _decode(raw: bytes) -> str | bytes:
    # STRING attributes are text in every standard op; a few vendor ops carry binary blobs, kept as bytes
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def make_attribute(name: str, value: Any, schema_type: int | None, where: str) -> AttributeProto:
    """`AttributeProto` for `value`; `schema_type` (an `AttributeProto` type code) wins when known."""
    kind = schema_type if schema_type is not None else _python_type(value, f"{where}: attribute '{name}'")
    where = f"{where}: attribute '{name}'"
    if kind == AttributeProto.FLOAT and isinstance(value, numbers.Real):
        value = float(value)
    elif kind == AttributeProto.FLOATS and isinstance(value, (list, tuple)):
        value = [float(v) for v in value]
    elif kind == AttributeProto.TENSOR:
        value = _to_tensor_proto(value, where)
    elif kind == AttributeProto.TENSORS:
        value = [_to_tensor_proto(v, f"{where}[{i}]") for i, v in enumerate(value)]
    try:
        return onnx.helper.make_attribute(name, value, attr_type=kind)
    except (TypeError, ValueError) as e:
        raise OnnxError(
            f"{where}: cannot write {type(value).__name__} as {AttributeProto.AttributeType.Name(kind)}: {e}"
        ) from e


@functools.cache
def schema_attribute_types(op_type: str, domain: str, opset: int) -> dict[str, int]:
    """Attribute name -> `AttributeProto` type code from onnx's schema; empty for ops onnx does not know."""
    try:
        schema = onnx.defs.get_schema(op_type, max_inclusive_version=opset, domain=domain)
    except onnx.defs.SchemaError:
        return {}
    # AttrType's values are AttributeProto's codes; pybind11 gives it __int__, which onnx's defs.pyi leaves out
    return {name: int(attr.type) for name, attr in schema.attributes.items()}  # type: ignore[call-overload]  # onnx stub lacks AttrType.__int__


def _python_type(value: Any, where: str) -> int:
    """The attribute type a Python value implies; an empty list is taken as INTS (axes, perm, pads)."""
    if isinstance(value, (TensorValue, np.ndarray)):
        return AttributeProto.TENSOR
    if isinstance(value, (bool, numbers.Integral)):
        return AttributeProto.INT
    if isinstance(value, numbers.Real):
        return AttributeProto.FLOAT
    if isinstance(value, (str, bytes)):
        return AttributeProto.STRING
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, (bool, numbers.Integral)) for v in value):
            return AttributeProto.INTS
        if all(isinstance(v, numbers.Real) for v in value):
            return AttributeProto.FLOATS
        if all(isinstance(v, (str, bytes)) for v in value):
            return AttributeProto.STRINGS
        if all(isinstance(v, (TensorValue, np.ndarray)) for v in value):
            return AttributeProto.TENSORS
    raise OnnxError(f"{where}: cannot write a {type(value).__name__} value {value!r:.60} as an ONNX attribute")


def _to_tensor_proto(value: Any, where: str) -> onnx.TensorProto:
    if isinstance(value, TensorValue):
        return tensor_proto(value.name, value.dtype, value.dims, value.numpy(), where)
    array = np.asarray(value)
    try:
        dtype = DataType.from_numpy(array.dtype)
    except Exception as e:
        raise OnnxError(f"{where}: a {array.dtype} array has no ONNX dtype") from e
    return tensor_proto("", dtype, array.shape, array, where)

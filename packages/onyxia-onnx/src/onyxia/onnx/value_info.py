"""`ValueInfoProto` <-> (DataType, TensorShape) for graph inputs, outputs and dumped intermediates.

Exporters write dims as free strings (``past_sequence_length + 1``, ``Addpast_key_values.0_dim_2``,
``batch:0``). Ones that parse become expressions shape inference can combine; the rest stay one
opaque name each, spelled exactly as in the file, so symbols still line up across inputs. Dims that
say "unknown" are read as onnxruntime reads them, each one its own dim: no value and no name, an
empty or blank name, a negative value (paddle2onnx writes -1), and the names ``?`` and ``-1`` (two
``?`` dims of one input are independent, so a 48x192 image binds both). Each gets a fresh symbol
named after its tensor and axis, ``unk__<tensor>_<axis>``; only a real name joins dims together.
Onyxia plans tensors only: a sequence, optional or map value that `onyxia.onnx.sequences` cannot turn into
tensors is refused at load, named with its type (`non_tensor_values`, run by validation on the inferred
graph, and `read_value_info` for graph inputs).
"""

from __future__ import annotations

import onnx
from onyxia.core.dtypes import DataType
from onyxia.core.errors import SymbolicError
from onyxia.core.shapes import Absent, TensorShape, shape_of
from onyxia.core.symbolic import SymbolicDim, SymbolicExpr
from onyxia.onnx.errors import OnnxError
from onyxia.onnx.tensors import to_datatype

__all__ = ["make_value_info", "non_tensor_values", "parse_dim", "read_value_info", "type_text"]


# dim_param spellings of "unknown" (onnxruntime's and paddle2onnx's), not names that join dims
_UNKNOWN_NAMES = frozenset({"?", "-1"})


def parse_dim(dim: onnx.TensorShapeProto.Dimension, tensor: str, axis: int) -> SymbolicDim:
    if dim.HasField("dim_value") and dim.dim_value >= 0:
        return int(dim.dim_value)
    name = dim.dim_param.strip() if dim.HasField("dim_param") else ""
    if name and name not in _UNKNOWN_NAMES:
        try:
            return SymbolicExpr.parse(dim.dim_param)
        except SymbolicError:
            return SymbolicExpr.name(dim.dim_param)
    return SymbolicExpr.name(f"unk__{tensor}_{axis}")


def read_value_info(info: onnx.ValueInfoProto, where: str) -> tuple[DataType, TensorShape]:
    """dtype and shape of a tensor-typed value; a missing shape (unknown rank) is an error."""
    if info.type.WhichOneof("value") != "tensor_type":
        raise OnnxError(f"{where}: has type {type_text(info.type)}; Onyxia runs tensors only")
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


def type_text(type_proto: onnx.TypeProto) -> str:
    """A value's type as ONNX writes it in schemas: ``tensor(float)``, ``sequence(tensor(int64))``, ..."""
    kind = type_proto.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        code = getattr(type_proto, kind).elem_type
        element = onnx.TensorProto.DataType.Name(code).lower() if code else "undefined"
        return f"{kind.removesuffix('_type')}({element})"
    if kind == "sequence_type":
        return f"sequence({type_text(type_proto.sequence_type.elem_type)})"
    if kind == "optional_type":
        return f"optional({type_text(type_proto.optional_type.elem_type)})"
    if kind == "map_type":
        key = onnx.TensorProto.DataType.Name(type_proto.map_type.key_type).lower()
        return f"map({key}, {type_text(type_proto.map_type.value_type)})"
    return kind or "undefined"


def non_tensor_values(graph: onnx.GraphProto) -> list[str]:
    """One problem per value of `graph` (after type inference) that is a sequence, optional or map:
    Onyxia plans tensors only, so such a model is refused at load, naming the value and its type."""
    producers = {name: (index, node) for index, node in enumerate(graph.node) for name in node.output}
    problems = []
    for info in [*graph.input, *graph.value_info, *graph.output]:
        if info.type.WhichOneof("value") in (None, "tensor_type"):
            continue
        index, node = producers.get(info.name, (-1, None))
        where = "graph input" if node is None else f"node '{node.name or f'{node.op_type}_{index}'}' ({node.op_type})"
        problems.append(f"value '{info.name}' of {where} has type {type_text(info.type)}; Onyxia runs tensors only")
    return list(dict.fromkeys(problems))

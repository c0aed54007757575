"""The model's interface as onnxruntime reports it, read from the protobuf: NodeArgs and metadata.

onnxruntime's `get_inputs()` shows each graph input's declared dims (dim_param strings verbatim,
``"?"`` and ``"-1"`` included; None for a dim with no value and no name, or a negative value), with
free-dimension overrides applied; `get_outputs()` shows the declared output shapes merged with its
shape inference (a declared name wins, an unknown dim takes the inferred value). onnx's own non-strict
inference merges the same way, so outputs are inferred on a weightless copy when any declared output
dim is not a fixed value. Everything here is plain data (`ModelSignature`), kept apart from the compiled
graph, so it can be cached with the plan; the tests compare it with onnxruntime on the same files.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import onnx
from onnx import TensorProto

from onyxia.core.symbolic import SymbolicExpr
from onyxia.onnx.topology import topological_order
from onyxia.onnx.value_info import parse_dim
from onyxia.ort.node_arg import Dim, ModelMetadata, NodeArg

__all__ = ["ModelSignature", "free_dimension_dims", "read_signature"]

_MADE_UP = re.compile(r"unk__\d+")  # onnx's inference names for dims it cannot tell
_INLINE_LIMIT = 4096  # initializers up to this many elements feed inference as data (Reshape targets)


@dataclass(frozen=True)
class ModelSignature:
    inputs: tuple[NodeArg, ...]
    outputs: tuple[NodeArg, ...]
    overridable: tuple[NodeArg, ...]  # graph inputs that are also initializers
    metadata: ModelMetadata


def read_signature(model: onnx.ModelProto, dims: Mapping[str, int]) -> ModelSignature:
    """The NodeArgs and metadata of `model`, its input dims whose symbols `dims` fixes shown as values
    (`free_dimension_dims`: onnxruntime shows its free-dimension overrides so)."""
    graph = model.graph
    weights = {t.name for t in graph.initializer}
    inputs = [_overridden(info, dims) for info in graph.input]
    outputs = list(graph.output)
    if not all(_is_fixed(info) for info in outputs):
        outputs = _inferred_outputs(model, inputs)
    meta = ModelMetadata(
        producer_name=model.producer_name,
        graph_name=graph.name,
        domain=model.domain,
        description=model.doc_string,
        graph_description=graph.doc_string,
        version=int(model.model_version),
        custom_metadata_map={prop.key: prop.value for prop in model.metadata_props},
    )
    return ModelSignature(
        inputs=tuple(_node_arg(i) for i in inputs if i.name not in weights),
        outputs=tuple(_node_arg(o) for o in outputs),
        overridable=tuple(_node_arg(i) for i in inputs if i.name in weights),
        metadata=meta,
    )


def free_dimension_dims(
    model: onnx.ModelProto, by_name: Mapping[str, int], by_denotation: Mapping[str, int]
) -> dict[str, int]:
    """The compile dims free-dimension overrides fix, by the symbols the loader gives input dims: a
    dim_param that is a plain name, or ``unk__<input>_<axis>`` for an unnamed dim set by its
    denotation. Overrides naming no input dim are dropped, as onnxruntime ignores them."""
    dims: dict[str, int] = {}
    for info in model.graph.input:
        for _axis, dim, symbol in _input_dims(info):
            if dim.HasField("dim_param") and dim.dim_param in by_name:
                dims[symbol] = int(by_name[dim.dim_param])
            elif dim.denotation and dim.denotation in by_denotation:
                dims[symbol] = int(by_denotation[dim.denotation])
    return dims


def _input_dims(info: onnx.ValueInfoProto) -> Iterator[tuple[int, onnx.TensorShapeProto.Dimension, str]]:
    """(axis, dim, loader's symbol) of each input dim that is one plain symbol (not a value, not an expression)."""
    if not info.type.tensor_type.HasField("shape"):
        return
    for axis, dim in enumerate(info.type.tensor_type.shape.dim):
        symbol = parse_dim(dim, info.name, axis)
        if isinstance(symbol, SymbolicExpr) and symbol.is_name:
            yield axis, dim, str(symbol)


def _overridden(info: onnx.ValueInfoProto, dims: Mapping[str, int]) -> onnx.ValueInfoProto:
    fixed = {axis: dims[symbol] for axis, _, symbol in _input_dims(info) if symbol in dims}
    if not fixed:
        return info
    copy = onnx.ValueInfoProto()
    copy.CopyFrom(info)
    for axis, value in fixed.items():
        copy.type.tensor_type.shape.dim[axis].dim_value = value  # a oneof with dim_param: that is cleared
    return copy


def _is_fixed(info: onnx.ValueInfoProto) -> bool:
    tensor = info.type.tensor_type
    if info.type.WhichOneof("value") != "tensor_type" or not tensor.elem_type or not tensor.HasField("shape"):
        return False
    return all(d.HasField("dim_value") and d.dim_value >= 0 for d in tensor.shape.dim)


def _inferred_outputs(model: onnx.ModelProto, inputs: list[onnx.ValueInfoProto]) -> list[onnx.ValueInfoProto]:
    """The declared outputs merged with onnx's non-strict inference on a copy without large weights;
    as declared where inference fails (onnxruntime's contrib ops are unknown to onnx)."""
    light = onnx.ModelProto(ir_version=model.ir_version)
    opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import}
    light.opset_import.extend(onnx.helper.make_opsetid(d, v) for d, v in opsets.items())
    light.functions.extend(model.functions)
    graph = light.graph
    try:
        order = topological_order(model.graph.node, "model")
    except Exception:  # the loader names a cycle or a dangling input; here the declared outputs do
        return list(model.graph.output)
    graph.node.extend(model.graph.node[i] for i in order)
    for node in graph.node:
        node.domain = "" if node.domain == "ai.onnx" else node.domain
    graph.input.extend(inputs)
    declared = {info.name for info in inputs}
    for tensor in model.graph.initializer:
        if tensor.data_location != TensorProto.EXTERNAL and math.prod(tensor.dims) <= _INLINE_LIMIT:
            graph.initializer.append(tensor)
        elif tensor.name not in declared:
            graph.input.append(onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims)))
    graph.output.extend(model.graph.output)
    try:
        inferred = onnx.shape_inference.infer_shapes(light, strict_mode=False)
    except Exception:  # onnx raises assorted types on models it cannot infer; the declared shapes stand
        return list(model.graph.output)
    written = {d.dim_param for info in (*model.graph.input, *model.graph.output) for d in _dims_of(info)}
    outputs = list(inferred.graph.output)
    for info in outputs:  # onnx names the unknown dims it makes up unk__<n>; onnxruntime leaves them unnamed
        for dim in _dims_of(info):
            if dim.HasField("dim_param") and _MADE_UP.fullmatch(dim.dim_param) and dim.dim_param not in written:
                dim.ClearField("dim_param")
    return outputs


def _dims_of(info: onnx.ValueInfoProto) -> list[onnx.TensorShapeProto.Dimension]:
    tensor = info.type.tensor_type
    return list(tensor.shape.dim) if info.type.HasField("tensor_type") and tensor.HasField("shape") else []


def _node_arg(info: onnx.ValueInfoProto) -> NodeArg:
    return NodeArg(info.name, _type_text(info.type), _shape(info.type))


def _shape(type_proto: onnx.TypeProto) -> list[Dim]:
    if type_proto.WhichOneof("value") != "tensor_type" or not type_proto.tensor_type.HasField("shape"):
        return []
    dims: list[Dim] = []
    for dim in type_proto.tensor_type.shape.dim:
        if dim.HasField("dim_value"):
            dims.append(int(dim.dim_value) if dim.dim_value >= 0 else None)
        elif dim.HasField("dim_param"):
            dims.append(dim.dim_param)
        else:
            dims.append(None)
    return dims


def _type_text(type_proto: onnx.TypeProto) -> str:
    """onnxruntime's type strings: ``tensor(float)``, ``seq(tensor(int64))``, ``map(string,tensor(float))``."""
    kind = type_proto.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        code = getattr(type_proto, kind).elem_type
        element = TensorProto.DataType.Name(code).lower() if code else "undefined"
        return f"{'sparse_tensor' if kind == 'sparse_tensor_type' else 'tensor'}({element})"
    if kind == "sequence_type":
        return f"seq({_type_text(type_proto.sequence_type.elem_type)})"
    if kind == "optional_type":
        return f"optional({_type_text(type_proto.optional_type.elem_type)})"
    if kind == "map_type":
        key = TensorProto.DataType.Name(type_proto.map_type.key_type).lower()
        return f"map({key},{_type_text(type_proto.map_type.value_type)})"
    return kind or "undefined"

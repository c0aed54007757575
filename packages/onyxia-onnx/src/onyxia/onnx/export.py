"""`IrGraph` -> `onnx.ModelProto`, so a graph can be dumped after any pass and run in onnxruntime.

The model is written self-contained (weights inline); save it with
``onnx.save_model(m, path, save_as_external_data=True)`` when it exceeds protobuf's 2 GB. Types
and shapes the passes inferred go into value_info, symbolic dims as their printed expression.
With ``drop_folded=True`` nodes whose outputs all have a compile-time value are left out and those
values become initializers: the dump then shows exactly the nodes that will run on the GPU.
"""

from __future__ import annotations

import numpy as np

import onnx
from onyxia.core.dtypes import DataType
from onyxia.core.ir import IrGraph, IrNode, TensorDef, TensorKind
from onyxia.core.nibbles import pack_4bit
from onyxia.core.subgraphs import CAPTURED_INPUTS, captured_inputs, own_inputs
from onyxia.onnx.attributes import make_attribute, schema_attribute_types
from onyxia.onnx.errors import OnnxError
from onyxia.onnx.tensors import tensor_proto
from onyxia.onnx.value_info import make_value_info

__all__ = ["to_onnx"]

# graph.metadata keys the loader fills from ModelProto fields; every other key is a metadata_props entry
_MODEL_KEYS = frozenset(
    {"path", "ir_version", "producer_name", "producer_version", "domain", "model_version", "doc_string"}
)


def to_onnx(graph: IrGraph, *, drop_folded: bool = False) -> onnx.ModelProto:
    """A model that `onnx.checker` accepts and onnxruntime runs with the graph's semantics."""
    return _model(graph, _graph_proto(graph, drop_folded))


def _graph_proto(graph: IrGraph, drop_folded: bool, captured: dict[int, str] | None = None) -> onnx.GraphProto:
    """`graph` as a GraphProto; `captured` (a subgraph's outer-scope inputs -> the outer names) are
    left out of the inputs and read by those names, as ONNX subgraphs read their outer scope."""
    captured = captured or {}
    nodes = _kept_nodes(graph, drop_folded)
    produced = {t for node in nodes for t in node.outputs if t is not None}
    proto = onnx.helper.make_graph(
        nodes=[_node_proto(graph, node) for node in nodes],
        name=graph.name,
        inputs=[_io_info(graph, t, "input", bool(captured)) for t in graph.inputs if t not in captured],
        outputs=[_io_info(graph, t, "output") for t in graph.outputs],
        initializer=_initializers(graph, nodes, produced),
        value_info=[
            make_value_info(t.name, t.dtype, t.shape)
            for t in graph.tensors
            if t.id in produced and t.id not in graph.outputs and t.dtype is not DataType.UNDEFINED
        ],
    )
    renames = {graph.tensor(t).name: name for t, name in captured.items()}
    for node in proto.node:
        node.input[:] = [renames.get(x, x) for x in node.input]
    for output in proto.output:
        output.name = renames.get(output.name, output.name)
    return proto


def _constant_value(tensor: TensorDef) -> np.ndarray | None:
    """The folded value if it can be written as an initializer.

    Object arrays hold symbolic dims (folded shape arithmetic): known structure, not storable data."""
    return tensor.value if tensor.value is not None and tensor.value.dtype != object else None


def _kept_nodes(graph: IrGraph, drop_folded: bool) -> list[IrNode]:
    """Nodes in topological order; folded ones dropped on request unless they feed a graph output."""
    order = graph.topological_order()
    if not drop_folded:
        return order

    def folded(node: IrNode) -> bool:
        outputs = [graph.tensor(t) for t in node.outputs if t is not None]
        return bool(outputs) and all(_constant_value(t) is not None and not graph.is_graph_output(t) for t in outputs)

    return [node for node in order if not folded(node)]


def _initializers(graph: IrGraph, nodes: list[IrNode], produced: set[int]) -> list[onnx.TensorProto]:
    """Weights the kept nodes and outputs use, plus folded values whose producers were dropped."""
    used = {t for node in nodes for t in node.inputs if t is not None} | set(graph.outputs)
    protos = []
    for tensor in graph.tensors:
        if tensor.id not in used or tensor.id in produced or tensor.kind is TensorKind.INPUT:
            continue
        where = f"graph '{graph.name}': tensor '{tensor.name}'"
        if tensor.initializer is not None:
            value = tensor.initializer
            protos.append(tensor_proto(tensor.name, value.dtype, value.dims, value.numpy(), where))
        elif (array := _constant_value(tensor)) is not None:
            dtype = tensor.dtype if tensor.dtype is not DataType.UNDEFINED else DataType.from_numpy(array.dtype)
            stored = pack_4bit(array) if dtype.is_packed else array  # folded 4-bit values are logical
            protos.append(tensor_proto(tensor.name, dtype, array.shape, stored, where))
        else:
            raise OnnxError(f"{where}: is used but has no producer, initializer or constant value")
    return protos


def _io_info(graph: IrGraph, tensor_id: int, role: str, subgraph: bool = False) -> onnx.ValueInfoProto:
    tensor = graph.tensor(tensor_id)
    if tensor.dtype is DataType.UNDEFINED and subgraph:  # typed by its node when compiled: onnx infers it too
        return onnx.helper.make_value_info(tensor.name, onnx.TypeProto())
    if tensor.dtype is DataType.UNDEFINED:
        raise OnnxError(
            f"graph '{graph.name}': {role} '{tensor.name}' has no dtype yet; ONNX requires a type on graph "
            f"{role}s (run shape inference before to_onnx)"
        )
    return make_value_info(tensor.name, tensor.dtype, tensor.shape)


def _node_proto(graph: IrGraph, node: IrNode) -> onnx.NodeProto:
    where = f"graph '{graph.name}': node '{node.name}' ({node.qualified_op})"
    opset = node.opset or graph.opset_imports.get(node.domain, 0)
    schema = schema_attribute_types(node.op_type, node.domain, opset) if opset else {}
    own = own_inputs(node)
    proto = onnx.helper.make_node(
        node.op_type,
        inputs=["" if t is None else graph.tensor(t).name for t in own],
        outputs=["" if t is None else graph.tensor(t).name for t in node.outputs],
        name=node.name,
        domain=node.domain or None,
    )
    outer = ["" if t is None else graph.tensor(t).name for t in captured_inputs(node)]
    for key, value in node.attributes.items():
        if isinstance(value, IrGraph):  # its last inputs are the captured reads, in the node's order
            reads = dict(zip(value.inputs[len(value.inputs) - len(outer) :], outer))
            proto.attribute.append(onnx.helper.make_attribute(key, _graph_proto(value, False, reads)))
        elif key != CAPTURED_INPUTS:
            proto.attribute.append(make_attribute(key, value, schema.get(key), where))
    return proto


def _model(graph: IrGraph, graph_proto: onnx.GraphProto) -> onnx.ModelProto:
    opsets = [onnx.helper.make_opsetid(domain, version) for domain, version in sorted(graph.opset_imports.items())]
    meta = graph.metadata
    ir_version = meta.get("ir_version", "")
    model = onnx.helper.make_model(
        graph_proto,
        opset_imports=opsets,
        ir_version=int(ir_version) if ir_version.isdigit() else onnx.helper.find_min_ir_version_for(opsets, True),
        producer_name="onyxia",
        doc_string=meta.get("doc_string", ""),
        domain=meta.get("domain", ""),
    )
    if meta.get("model_version", "").isdigit():
        model.model_version = int(meta["model_version"])
    onnx.helper.set_model_props(model, {k: str(v) for k, v in meta.items() if k not in _MODEL_KEYS})
    return model

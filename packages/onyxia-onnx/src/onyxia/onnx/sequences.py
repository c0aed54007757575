"""Sequence and Optional values whose contents are known at load become the tensors they hold.

Onyxia plans tensors only. A sequence whose length and positions are fixed by the graph itself is just a
list of tensor names, so its ops rewrite into tensor ops before anything else reads the model:
SequenceConstruct / SequenceEmpty / SequenceInsert / SequenceErase edit the list (positions from constants),
SequenceAt picks one element (an `Identity`), SequenceLength is a `Constant`, ConcatFromSequence is a
`Concat` (each element `Unsqueeze`d first with ``new_axis=1``), SplitToSequence is a `Split` (sizes from its
constant `split`, or from the static dim; `Squeeze`d with ``keepdims=0``). An Optional is its tensor or
nothing: OptionalHasElement becomes a `Constant`, OptionalGetElement an `Identity`. Every element stays a
separate tensor, planned as its own buffer. Anything else (a position computed at run time, a sequence as
a graph input or output, or read by any other op or a subgraph) leaves the model unchanged, and validation
refuses the sequence naming the value and its type (`value_info.non_tensor_values`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import onnx
from onnx import AttributeProto, helper, numpy_helper
from onyxia.onnx.topology import topological_order

__all__ = ["resolve_sequences"]

_SMALL = 4096  # initializers read as positions or split sizes are small


class _Unresolved(Exception):
    """A sequence or optional this module cannot turn into tensors: the model is left as it was."""


@dataclass
class _State:
    constants: dict[str, np.ndarray]
    dims: dict[str, list[int | None]]
    opset: int
    taken: set[str]
    sequences: dict[str, list[str]] = field(default_factory=dict)
    optionals: dict[str, str | None] = field(default_factory=dict)
    nodes: list[onnx.NodeProto] = field(default_factory=list)

    def fresh(self, base: str) -> str:
        name, k = base, 0
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name

    def constant(self, base: str, value: np.ndarray) -> str:
        name = self.fresh(base)
        self.nodes.append(helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name)))
        return name

    def int_input(self, node: onnx.NodeProto, i: int, default: int | None = None) -> int:
        if i >= len(node.input) or not node.input[i]:
            if default is None:
                raise _Unresolved
            return default
        value = self.constants.get(node.input[i])
        if value is None or value.size != 1:
            raise _Unresolved
        return int(value.reshape(()))

    def elements(self, name: str) -> list[str]:
        if name not in self.sequences:
            raise _Unresolved
        return self.sequences[name]

    def axes_op(self, op: str, x: str, out: str, axis: int) -> None:
        """Unsqueeze or Squeeze of one axis, in the model's opset's form (an input from opset 13 on)."""
        if self.opset >= 13:
            axes = self.constant(f"{out}/axes", np.array([axis], np.int64))
            self.nodes.append(helper.make_node(op, [x, axes], [out]))
        else:
            self.nodes.append(helper.make_node(op, [x], [out], axes=[axis]))


def resolve_sequences(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with its sequence and optional ops turned into tensor ops (a copy), or `model` itself."""
    graph = model.graph
    if not any(node.op_type in _RULES and node.domain in ("", "ai.onnx") for node in graph.node):
        return model
    if any(attr.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for n in graph.node for attr in n.attribute):
        return model
    state = _State(_constants(graph), {}, _opset(model), _names(graph))
    try:
        for index in topological_order(graph.node, "model"):
            node = graph.node[index]
            rule = _RULES.get(node.op_type) if node.domain in ("", "ai.onnx") else None
            if rule is None:
                if any(name in state.sequences or name in state.optionals for name in node.input):
                    raise _Unresolved
                state.nodes.append(node)
                continue
            if rule is _split_to_sequence and not state.dims:
                state.dims = _static_dims(model)
            rule(node, state)
    except _Unresolved:
        return model
    outputs = {info.name for info in graph.output}
    if outputs & (state.sequences.keys() | state.optionals.keys()):
        return model
    resolved = onnx.ModelProto()
    resolved.CopyFrom(model)
    del resolved.graph.node[:]
    resolved.graph.node.extend(state.nodes)
    kept = [info for info in resolved.graph.value_info if info.type.WhichOneof("value") == "tensor_type"]
    del resolved.graph.value_info[:]
    resolved.graph.value_info.extend(kept)
    return resolved


# ----- one rule per op ----------------------------------------------------------------------------
def _sequence_construct(node: onnx.NodeProto, state: _State) -> None:
    state.sequences[node.output[0]] = list(node.input)


def _sequence_empty(node: onnx.NodeProto, state: _State) -> None:
    state.sequences[node.output[0]] = []


def _sequence_insert(node: onnx.NodeProto, state: _State) -> None:
    elements = list(state.elements(node.input[0]))
    position = state.int_input(node, 2, len(elements))
    if not -len(elements) <= position <= len(elements):
        raise _Unresolved
    elements.insert(position + len(elements) if position < 0 else position, node.input[1])
    state.sequences[node.output[0]] = elements


def _sequence_erase(node: onnx.NodeProto, state: _State) -> None:
    elements = list(state.elements(node.input[0]))
    position = state.int_input(node, 1, -1)
    if not -len(elements) <= position < len(elements):
        raise _Unresolved
    del elements[position]
    state.sequences[node.output[0]] = elements


def _sequence_at(node: onnx.NodeProto, state: _State) -> None:
    elements = state.elements(node.input[0])
    position = state.int_input(node, 1)
    if not -len(elements) <= position < len(elements):
        raise _Unresolved
    state.nodes.append(helper.make_node("Identity", [elements[position]], [node.output[0]], name=node.name))


def _sequence_length(node: onnx.NodeProto, state: _State) -> None:
    value = numpy_helper.from_array(np.array(len(state.elements(node.input[0])), np.int64), node.output[0])
    state.nodes.append(helper.make_node("Constant", [], [node.output[0]], name=node.name, value=value))


def _concat_from_sequence(node: onnx.NodeProto, state: _State) -> None:
    elements = state.elements(node.input[0])
    if not elements:
        raise _Unresolved  # onnxruntime fails on an empty sequence at run time
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    axis = int(attrs["axis"])
    if int(attrs.get("new_axis", 0)):
        expanded = []
        for element in elements:
            expanded.append(state.fresh(f"{node.output[0]}/{element}/unsqueezed"))
            state.axes_op("Unsqueeze", element, expanded[-1], axis)
        elements = expanded
    state.nodes.append(helper.make_node("Concat", elements, [node.output[0]], name=node.name, axis=axis))


def _split_to_sequence(node: onnx.NodeProto, state: _State) -> None:
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    axis, keepdims = int(attrs.get("axis", 0)), int(attrs.get("keepdims", 1))
    dims = state.dims.get(node.input[0])
    split = state.constants.get(node.input[1]) if len(node.input) > 1 and node.input[1] else None
    if len(node.input) > 1 and node.input[1] and split is None:
        raise _Unresolved
    if split is not None and split.ndim == 1:
        sizes = [int(s) for s in split]
    else:
        length = dims[axis] if dims is not None and -len(dims) <= axis < len(dims) else None
        if length is None:
            raise _Unresolved
        chunk = 1 if split is None else int(split.reshape(()))
        if chunk <= 0:
            raise _Unresolved
        sizes = [min(chunk, length - start) for start in range(0, length, chunk)]
    if not sizes:
        raise _Unresolved
    parts = [state.fresh(f"{node.output[0]}/{k}") for k in range(len(sizes))]
    if state.opset >= 13:
        sizes_name = state.constant(f"{node.output[0]}/split", np.array(sizes, np.int64))
        state.nodes.append(helper.make_node("Split", [node.input[0], sizes_name], parts, name=node.name, axis=axis))
    else:
        state.nodes.append(helper.make_node("Split", [node.input[0]], parts, name=node.name, axis=axis, split=sizes))
    if split is None and not keepdims:
        squeezed = [state.fresh(f"{part}/squeezed") for part in parts]
        for part, out in zip(parts, squeezed, strict=True):
            state.axes_op("Squeeze", part, out, axis)
        parts = squeezed
    state.sequences[node.output[0]] = parts


def _optional(node: onnx.NodeProto, state: _State) -> None:
    value = node.input[0] if node.input and node.input[0] else None
    if value is not None and value in state.optionals:
        raise _Unresolved
    state.optionals[node.output[0]] = value


def _optional_has_element(node: onnx.NodeProto, state: _State) -> None:
    source = node.input[0] if node.input else ""
    present = state.optionals[source] is not None if source in state.optionals else bool(source)
    value = numpy_helper.from_array(np.array(present), node.output[0])
    state.nodes.append(helper.make_node("Constant", [], [node.output[0]], name=node.name, value=value))


def _optional_get_element(node: onnx.NodeProto, state: _State) -> None:
    source = node.input[0]
    value = state.optionals.get(source, source)
    if value is None:
        raise _Unresolved  # onnxruntime fails getting the element of an empty optional
    if value in state.sequences:
        state.sequences[node.output[0]] = state.sequences[value]
    else:
        state.nodes.append(helper.make_node("Identity", [value], [node.output[0]], name=node.name))


_RULES: dict[str, Callable[[onnx.NodeProto, _State], None]] = {
    "SequenceConstruct": _sequence_construct,
    "SequenceEmpty": _sequence_empty,
    "SequenceInsert": _sequence_insert,
    "SequenceErase": _sequence_erase,
    "SequenceAt": _sequence_at,
    "SequenceLength": _sequence_length,
    "ConcatFromSequence": _concat_from_sequence,
    "SplitToSequence": _split_to_sequence,
    "Optional": _optional,
    "OptionalHasElement": _optional_has_element,
    "OptionalGetElement": _optional_get_element,
}


# ----- what the graph fixes --------------------------------------------------------------------------
def _constants(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    """Small initializers and Constant tensors: the positions and split sizes a sequence op may read."""
    values = {
        t.name: numpy_helper.to_array(t)
        for t in graph.initializer
        if t.data_location != onnx.TensorProto.EXTERNAL and int(np.prod(t.dims)) <= _SMALL
    }
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            for attr in node.attribute:
                if attr.name == "value" and attr.t.data_location != onnx.TensorProto.EXTERNAL:
                    values[node.output[0]] = numpy_helper.to_array(attr.t)
                elif attr.name in ("value_int", "value_ints"):
                    values[node.output[0]] = np.array(helper.get_attribute_value(attr), np.int64)
    return values


def _static_dims(model: onnx.ModelProto) -> dict[str, list[int | None]]:
    """Every value's dims as onnx's (non-strict) shape inference knows them, None where symbolic."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # a model onnx cannot infer keeps its sequences, and validation names them
        return {}
    dims: dict[str, list[int | None]] = {}
    for info in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        if info.type.HasField("tensor_type") and info.type.tensor_type.HasField("shape"):
            shape = info.type.tensor_type.shape.dim
            dims[info.name] = [d.dim_value if d.HasField("dim_value") else None for d in shape]
    for t in model.graph.initializer:
        dims[t.name] = [int(d) for d in t.dims]
    return dims


def _opset(model: onnx.ModelProto) -> int:
    return next((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)


def _names(graph: onnx.GraphProto) -> set[str]:
    names = {t.name for t in graph.initializer} | {i.name for i in graph.input}
    return names | {name for node in graph.node for name in node.output}

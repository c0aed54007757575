"""What the control-flow rewrites (`scan_as_loop`, `unroll_loops`) share: walking nested graphs,
model-wide fresh names, small constants, and scope-aware renaming of a subgraph copy.

ONNX subgraphs may read any name of an enclosing graph, so a rewrite that adds or copies nodes must
pick names no graph of the model uses yet (`Names`), and a copied subgraph must rename the enclosing
names it reads while leaving the names it defines itself (or renaming those too, so copies never
collide: `renamed_graph`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import numpy as np

import onnx
from onnx import AttributeProto, helper, numpy_helper

__all__ = [
    "Names",
    "all_graphs",
    "constant_values",
    "contains_op",
    "default_opset",
    "graph_attributes",
    "is_onnx_op",
    "reads",
    "rename_node",
    "renamed_graph",
    "scalar_constant",
]

_SMALL = 64  # constants read as trip counts or conditions are scalars; never decode big tensors


def is_onnx_op(node: onnx.NodeProto, op_type: str) -> bool:
    return node.op_type == op_type and node.domain in ("", "ai.onnx")


def default_opset(model: onnx.ModelProto) -> int:
    return next((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)


def graph_attributes(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """The node's subgraphs (If branches, Loop/Scan bodies), as the live messages."""
    for attr in node.attribute:
        if attr.type == AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == AttributeProto.GRAPHS:
            yield from attr.graphs


def all_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    yield graph
    for node in graph.node:
        for sub in graph_attributes(node):
            yield from all_graphs(sub)


def outer_reads(graph: onnx.GraphProto) -> list[str]:
    """Names `graph` (with its nested subgraphs) reads but does not define, in first-use order: what
    the loader makes explicit inputs of the node that holds it (`onyxia.core.subgraphs`)."""
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    defined |= {name for node in graph.node for name in node.output if name}
    found: dict[str, None] = {}
    for node in graph.node:
        for name in [*node.input, *implicit_inputs(node)]:
            if name and name not in defined:
                found.setdefault(name)
    for output in graph.output:
        if output.name not in defined:
            found.setdefault(output.name)
    return list(found)


def implicit_inputs(node: onnx.NodeProto) -> list[str]:
    """Outer-scope names the node's subgraphs read, each once, in first-use order."""
    found: dict[str, None] = {}
    for graph in graph_attributes(node):
        found.update(dict.fromkeys(outer_reads(graph)))
    return list(found)


def nodes_within(graph: onnx.GraphProto, where: str = "") -> Iterator[tuple[onnx.NodeProto, str]]:
    """Every node with a description for errors, those of a node's subgraphs right after it."""
    for index, node in enumerate(graph.node):
        described = f"{where}node '{node.name or f'{node.op_type}_{index}'}' ({node.op_type})"
        yield node, described
        for attr in node.attribute:
            if attr.type == AttributeProto.GRAPH:
                yield from nodes_within(attr.g, f"{described}: {attr.name}: ")


def contains_op(graph: onnx.GraphProto, op_type: str) -> bool:
    """Whether `graph` or any graph nested in it holds an ONNX-domain `op_type` node."""
    return any(is_onnx_op(node, op_type) for g in all_graphs(graph) for node in g.node)


class Names:
    """Fresh tensor and node names: none used anywhere in the model (all nested graphs included)."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.taken: set[str] = set()
        for g in all_graphs(model.graph):
            self.taken |= {v.name for v in (*g.input, *g.output, *g.value_info)}
            self.taken |= {t.name for t in g.initializer}
            for node in g.node:
                self.taken |= {*node.input, *node.output, node.name}

    def fresh(self, base: str) -> str:
        name, k = base, 0
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name


def constant_values(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    """Small constants `graph` defines: initializers and `Constant` nodes (`value` or `value_int`)."""
    values: dict[str, np.ndarray] = {}
    overridable = {value.name for value in graph.input}  # an initializer that is also an input: a default
    for tensor in graph.initializer:
        if (
            tensor.name not in overridable
            and tensor.data_location != onnx.TensorProto.EXTERNAL
            and _size(tensor.dims) <= _SMALL
        ):
            values[tensor.name] = numpy_helper.to_array(tensor)
    for node in graph.node:
        if not is_onnx_op(node, "Constant") or len(node.attribute) != 1:
            continue
        attr = node.attribute[0]
        if attr.name == "value" and _size(attr.t.dims) <= _SMALL:
            values[node.output[0]] = numpy_helper.to_array(attr.t)
        elif attr.name == "value_int":
            values[node.output[0]] = np.array(attr.i, np.int64)
    return values


def reads(node: onnx.NodeProto) -> set[str]:
    """Every name `node` reads: its inputs and any name its subgraphs mention (a superset of their
    enclosing-scope reads)."""
    names = set(node.input)
    for sub in graph_attributes(node):
        for g in all_graphs(sub):
            names |= {value.name for value in g.output}
            names |= {name for inner in g.node for name in inner.input}
    return names


def _size(dims: object) -> int:
    return int(np.prod(list(dims))) if dims else 1  # type: ignore[call-overload]


def renamed_graph(graph: onnx.GraphProto, outer: Mapping[str, str], fresh: Callable[[str], str]) -> onnx.GraphProto:
    """A copy of `graph` reading enclosing names through `outer` (names not in it stay) and with every
    name it defines (inputs, initializers, node outputs, node names, nested graphs' too) made fresh."""
    local = dict(outer)
    copy = onnx.GraphProto()
    copy.CopyFrom(graph)
    for defined in (*copy.input, *copy.initializer):
        new = fresh(defined.name)
        local[defined.name] = new
        defined.name = new
    for node in copy.node:
        rename_node(node, local, fresh)
    for value in copy.output:
        value.name = local.get(value.name, value.name)
    kept = [v for v in copy.value_info if v.name in local]
    for value in kept:
        value.name = local[value.name]
    del copy.value_info[:]
    copy.value_info.extend(kept)
    return copy


def rename_node(node: onnx.NodeProto, names: dict[str, str], fresh: Callable[[str], str]) -> None:
    """Rename `node` in place: inputs through `names`, outputs (added to `names`) and its name made fresh,
    its subgraphs copied through `renamed_graph` (they may read names defined before `node`)."""
    for i, name in enumerate(node.input):
        node.input[i] = names.get(name, name)
    for attr in node.attribute:
        if attr.type == AttributeProto.GRAPH:
            attr.g.CopyFrom(renamed_graph(attr.g, names, fresh))
        elif attr.type == AttributeProto.GRAPHS:
            for g in attr.graphs:
                g.CopyFrom(renamed_graph(g, names, fresh))
    for i, name in enumerate(node.output):
        if name:
            node.output[i] = names[name] = fresh(name)
    if node.name:
        node.name = fresh(node.name)


def scalar_constant(name: str, value: np.ndarray) -> onnx.NodeProto:
    """A `Constant` node making `value` as `name`."""
    return helper.make_node("Constant", [], [name], name=name, value=numpy_helper.from_array(value, name))

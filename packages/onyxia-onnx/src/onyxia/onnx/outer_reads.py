"""Which outer-scope names a subgraph reads: what the loader makes explicit node inputs.

A subgraph (an If branch, a Loop body) may read any name defined in a scope around it, also from a
subgraph nested deeper. `outer_reads` lists those names in first-use order; `implicit_inputs` is the
union over a node's subgraph attributes, the order every one of the node's subgraphs declares them in.
"""

from __future__ import annotations

import onnx
from onnx import AttributeProto

__all__ = ["implicit_inputs", "outer_reads"]


def outer_reads(graph: onnx.GraphProto) -> list[str]:
    """Names `graph` (with its nested subgraphs) reads but does not define, in first-use order."""
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    defined |= {name for node in graph.node for name in node.output if name}
    reads: dict[str, None] = {}
    for node in graph.node:
        for name in [*node.input, *implicit_inputs(node)]:
            if name and name not in defined:
                reads.setdefault(name)
    for output in graph.output:
        if output.name not in defined:
            reads.setdefault(output.name)
    return list(reads)


def implicit_inputs(node: onnx.NodeProto) -> list[str]:
    """Outer-scope names the node's subgraph attributes read, each once, in first-use order."""
    reads: dict[str, None] = {}
    for attr in node.attribute:
        graphs = [attr.g] if attr.type == AttributeProto.GRAPH else list(attr.graphs)
        for graph in graphs:
            reads.update(dict.fromkeys(outer_reads(graph)))
    return list(reads)

"""`DeadCodeEliminationPass`: remove nodes none of whose outputs is used.

Exporters leave unused branches (shape computations for outputs that were pruned), and rewrites
leave the nodes they bypass; each would still cost its dispatches and its buffers. An output is
used when a node reads it, when it is a graph output, or when it is a key of `graph.aliases`: its
producer then writes into another tensor's storage (a KV cache appended in place), a side effect
no consumer shows.

Nodes are visited in reverse order, so a dead chain goes in one sweep: a consumer is removed
before its producer is looked at. Removed nodes' output tensors go with them.
"""

from __future__ import annotations

import logging

from onyxia.core import IrGraph, IrNode, OperatorRegistry, Stage

__all__ = ["DeadCodeEliminationPass"]

log = logging.getLogger(__name__)


class DeadCodeEliminationPass:
    name = "DeadCodeElimination"
    stage = Stage.OPTIMIZATION

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        removed = sum(_remove_if_dead(graph, node) for node in reversed(graph.nodes))
        log.info("%s: removed %d nodes", self.name, removed)
        return removed > 0


def _remove_if_dead(graph: IrGraph, node: IrNode) -> bool:
    outputs = [t for t in node.outputs if t is not None]
    if any(graph.tensor_consumers(t) or graph.is_graph_output(t) or t in graph.aliases for t in outputs):
        return False
    graph.remove_node(node)
    for t in outputs:
        graph.remove_tensor(t)
    return True

"""`IrGraph`: the complete graph — the store and edit layers plus whole-graph order, check and copy.

The layers stack as `GraphStore` (state, add, look up; `ir_store`) -> `GraphEditor` (rewire,
remove; `ir_edit`) -> `IrGraph`. What lives here looks at the whole graph at once: the
topological order, `check()` (which `ONYXIA_CHECK=1` runs after every pass to catch map drift),
the deep copy, and printing (the text itself is `onyxia.core.ir_format`).
"""

from __future__ import annotations

import copy

from onyxia.core import ir_format
from onyxia.core.ir_edit import GraphEditor
from onyxia.core.ir_records import GraphError, IrNode

__all__ = ["IrGraph"]


class IrGraph(GraphEditor):
    """Nodes, tensors and the producer/consumer maps that stay in step with every edit."""

    def topological_order(self) -> list[IrNode]:
        """Nodes sorted so producers precede consumers (stable w.r.t. the current order)."""
        nodes = self.nodes
        remaining = {n.id: sum(1 for t in set(n.inputs) if t is not None and t in self._producer) for n in nodes}
        ready = [n.id for n in nodes if remaining[n.id] == 0]
        order: list[IrNode] = []
        position = {n.id: i for i, n in enumerate(nodes)}
        while ready:
            ready.sort(key=position.__getitem__, reverse=True)
            node = self._nodes[ready.pop()]
            order.append(node)
            for t in node.outputs:
                if t is None:
                    continue
                for consumer in {c for c, _ in self._consumers[t]}:
                    remaining[consumer] -= 1
                    if remaining[consumer] == 0:
                        ready.append(consumer)
        if len(order) != len(self._nodes):
            stuck = [self._nodes[n].name for n, r in remaining.items() if r > 0]
            raise GraphError(f"graph '{self.name}' has a cycle through nodes {stuck[:5]}")
        return order

    def check(self) -> None:
        """Verify the producer/consumer maps against the nodes; raise `GraphError` on drift."""
        for node in self._nodes.values():
            for i, t in enumerate(node.inputs):
                if t is not None and (node.id, i) not in self._consumers.get(t, []):
                    raise GraphError(f"node '{node.name}' input {i} is not tracked as a use")
            for t in node.outputs:
                if t is not None and self._producer.get(t) != node.id:
                    raise GraphError(f"node '{node.name}' output is not tracked as produced by it")
        for t, uses in self._consumers.items():
            for nid, i in uses:
                if nid not in self._nodes or self._nodes[nid].inputs[i] != t:
                    raise GraphError(f"stale use of tensor {t} by node {nid}")
        self.topological_order()

    def copy(self) -> IrGraph:
        """A deep copy of the structure (subgraph attributes too); weight data (`TensorValue`) is shared."""
        memo: dict[int, object] = {}
        self._share_weights(memo)
        return copy.deepcopy(self, memo)

    def _share_weights(self, memo: dict[int, object]) -> None:
        memo.update({id(t.initializer): t.initializer for t in self._tensors.values() if t.initializer is not None})
        for node in self._nodes.values():
            for value in node.attributes.values():
                if isinstance(value, IrGraph):
                    value._share_weights(memo)

    # ----- display -----------------------------------------------------------------------
    def format_node(self, node: IrNode) -> str:
        return ir_format.format_node(self, node)

    def __str__(self) -> str:
        return ir_format.format_graph(self)

"""`CommonSubexpressionEliminationPass`: a node computing what an earlier node computed reuses it.

Exporters repeat per layer work that depends only on the inputs: optimum's Gemma 3 export (the
gemma3-tiny-optimum fixture) has 317 such nodes, mostly Constants and Shape -> Unsqueeze -> Concat
chains (folded, but each folded again) and the attention mask's Equal/Where/Mul. Two nodes are the
same computation when they agree on (domain, op_type, opset, output slots, input ids, attributes).

Nodes are visited in graph (topological) order and keyed after earlier merges were applied, so a
duplicated chain collapses in one sweep. Declines:
- random ops (RandomNormal, Bernoulli, Dropout, ...): two draws are not one;
- nodes with a tensor attribute over `MAX_ATTRIBUTE_ELEMENTS` elements (hashing a big Constant
  costs more than the copy it saves) or an attribute value that is not plain data;
- a duplicate with a graph output (its name is part of the model's interface);
- nodes with an output in `graph.aliases` (they write into another tensor's storage).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from onyxia.core import IrGraph, IrNode, OperatorRegistry, Stage, TensorValue

__all__ = ["MAX_ATTRIBUTE_ELEMENTS", "CommonSubexpressionEliminationPass"]

log = logging.getLogger(__name__)

MAX_ATTRIBUTE_ELEMENTS = 1024
_RANDOM_OPS = frozenset(
    {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial", "Bernoulli", "Dropout"}
)

_Key = tuple[Any, ...]


class CommonSubexpressionEliminationPass:
    name = "CommonSubexpressionElimination"
    stage = Stage.OPTIMIZATION

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        seen: dict[_Key, IrNode] = {}
        merged = sum(_merge_if_seen(graph, node, seen) for node in graph.nodes)
        log.info("%s: merged %d nodes", self.name, merged)
        return merged > 0


def _merge_if_seen(graph: IrGraph, node: IrNode, seen: dict[_Key, IrNode]) -> bool:
    key = _key(graph, node)
    if key is None:
        return False
    first = seen.setdefault(key, node)
    if first is node or any(t is not None and graph.is_graph_output(t) for t in node.outputs):
        return False
    for old, new in zip(node.outputs, first.outputs):
        if old is not None:
            graph.replace_all_uses(old, new)
    graph.remove_node(node)
    for t in node.outputs:
        if t is not None:
            graph.remove_tensor(t)
    return True


def _key(graph: IrGraph, node: IrNode) -> _Key | None:
    """What `node` computes, or None when it must not be merged."""
    if node.domain == "" and node.op_type in _RANDOM_OPS:
        return None
    if any(t in graph.aliases for t in node.outputs if t is not None):
        return None
    attributes = []
    for name, value in sorted(node.attributes.items()):
        frozen = _frozen(value)
        if frozen is None:
            log.debug("CommonSubexpressionElimination: skipped %s, attribute '%s' is big or opaque", node.name, name)
            return None
        attributes.append((name, frozen))
    slots = tuple(t is None for t in node.outputs)
    return (node.domain, node.op_type, node.opset, slots, tuple(node.inputs), tuple(attributes))


def _frozen(value: Any) -> Any:
    """A hashable stand-in for an attribute value; None for a big tensor or an unknown type.

    The type name is part of it: ``alpha=1`` and ``alpha=1.0`` hash alike but are exported differently."""
    if isinstance(value, TensorValue):
        if value.numel > MAX_ATTRIBUTE_ELEMENTS:
            return None
        value = value.numpy()
    if isinstance(value, np.ndarray):
        if value.size > MAX_ATTRIBUTE_ELEMENTS or value.dtype == object:
            return None
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        items = tuple(_frozen(v) for v in value)
        return None if any(i is None for i in items) else ("list", items)
    if isinstance(value, float):
        return ("float", repr(value))  # -0.0 and 0.0 compare equal; nan never does
    if isinstance(value, (bool, int, str, bytes)):
        return (type(value).__name__, value)
    return None

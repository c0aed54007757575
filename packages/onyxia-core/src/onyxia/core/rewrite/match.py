"""`Match` and `Decline`, the two answers a pattern and its check give, and the helpers checks use.

A `Match` holds what the pattern bound; a `Decline` says why a rule that recognised its pattern did
not apply, naming the culprit, so ``ONYXIA_DEBUG=2`` can tell a user which exporter quirk stopped a
fusion.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from onyxia.core.ir_graph import IrGraph
from onyxia.core.ir_records import IrNode, TensorRef

__all__ = ["Decline", "Match", "is_folded", "private_outputs", "producer", "sole_use"]


@dataclass(frozen=True)
class Decline:
    """Why a rule that recognised its pattern did not apply, and the node or value at fault."""

    reason: str
    culprit: object = None


class Match(SimpleNamespace):
    """The anchor `node`, every matched node (`nodes`, anchor first) and what the pattern bound:
    tensors (ids) for `Var`/`Const`, nodes for named op patterns, values for `Attr` captures."""

    node: IrNode
    nodes: list[IrNode]

    def __init__(self, node: IrNode, *, nodes: Sequence[IrNode] = (), **bindings: Any) -> None:
        super().__init__(node=node, nodes=list(nodes) or [node], **bindings)


def producer(graph: IrGraph, tensor: TensorRef | None, op_types: Collection[str], domain: str = "") -> IrNode | None:
    """The node producing `tensor` when its op type is one of `op_types` (in `domain`)."""
    node = None if tensor is None else graph.tensor_producer(tensor)
    return node if node is not None and node.op_type in op_types and node.domain == domain else None


def sole_use(graph: IrGraph, tensor: TensorRef) -> IrNode | None:
    """The one node reading `tensor`, when it has exactly one use and nothing else sees it (not a
    graph output, not shared storage): a rewrite may then change or drop it freely."""
    uses = graph.tensor_consumers(tensor)
    tid = graph.tensor(tensor).id
    if len(uses) != 1 or graph.is_graph_output(tid) or tid in graph.aliases or tid in graph.aliases.values():
        return None
    return uses[0][0]


def private_outputs(graph: IrGraph, node: IrNode, members: Collection[int]) -> bool:
    """Every output of `node` is read only by nodes in `members` (ids): not a graph output, not
    shared storage; removing `node` with them loses nothing anyone else sees."""
    for t in node.outputs:
        if t is None:
            continue
        if graph.is_graph_output(t) or t in graph.aliases or t in graph.aliases.values():
            return False
        if any(n.id not in members for n, _ in graph.tensor_consumers(t)):
            return False
    return True


def is_folded(graph: IrGraph, node: IrNode) -> bool:
    """All outputs known at compile time: the node emits no GPU step, so rewriting it gains nothing."""
    return all(t is None or graph.tensor(t).value is not None for t in node.outputs)

"""`Rewriter`: what a rule's replacement is built with, and the one place a replacement is applied.

`r.op("MatMulTransB", m.x, m.w, domain=ONYXIA)` records a node and returns placeholders for its
outputs; nothing touches the graph until the rule returns, so a replacement that returns None (or a
check that fails later) leaves the graph exactly as it was. `commit` then, for every rule alike:

1. decides which matched nodes die (all their outputs replaced or read only by dying nodes);
2. inserts the new nodes where every input is ready and before the first surviving use of a result;
3. removes the dying nodes and hands their replaced output tensors to the new nodes, so tensor ids,
   names, shapes and graph outputs stay as they were (or moves uses to an existing value);
4. infers the shapes of the new nodes' other outputs through their operators.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from onyxia.core.context import InferenceCtx
from onyxia.core.dtypes import DataType
from onyxia.core.ir_graph import IrGraph
from onyxia.core.ir_records import IrNode, TensorRef
from onyxia.core.registry import OperatorRegistry
from onyxia.core.rewrite.match import Decline, Match
from onyxia.core.shapes import Absent

__all__ = ["NewValue", "Rewriter"]


@dataclass(frozen=True)
class NewValue:
    """Output `output` of the `spec`-th node a `Rewriter` recorded."""

    spec: int
    output: int


@dataclass(frozen=True)
class _NodeSpec:
    op_type: str
    domain: str
    inputs: tuple[TensorRef | NewValue | None, ...]
    attributes: dict[str, Any]
    outputs: int
    name: str | None


class Rewriter:
    def __init__(self, graph: IrGraph, match: Match) -> None:
        self.graph = graph
        self.match = match
        self._specs: list[_NodeSpec] = []

    def op(
        self,
        op_type: str,
        *inputs: TensorRef | NewValue | None,
        domain: str = "",
        outputs: int = 1,
        name: str | None = None,
        **attributes: Any,
    ) -> NewValue:
        """Record a node; returns its first output (`outputs_of` gives the rest)."""
        self._specs.append(_NodeSpec(op_type, domain, inputs, attributes, outputs, name))
        return NewValue(len(self._specs) - 1, 0)

    def outputs_of(self, value: NewValue) -> tuple[NewValue, ...]:
        return tuple(NewValue(value.spec, k) for k in range(self._specs[value.spec].outputs))

    # ----- applying -------------------------------------------------------------------------
    def commit(
        self, replacement: Mapping[int, TensorRef | NewValue], registry: OperatorRegistry
    ) -> list[IrNode] | Decline:
        """Apply the recorded nodes with `replacement` ({old tensor id: new value}); returns the new nodes."""
        graph = self.graph
        for old, new in replacement.items():
            if not isinstance(new, NewValue) and _seen_outside(graph, old):
                return Decline(
                    f"'{graph.tensor(old).name}' is a graph output or shared; it cannot become another value"
                )
        dying = _dying(graph, self.match.nodes, replacement)
        if any(t in replacement for n in self.match.nodes if n.id not in dying for t in n.outputs):
            return Decline("a matched node must stay for another output, but one of its outputs is replaced")
        anchor = self._anchor(replacement, dying)
        if isinstance(anchor, Decline):
            return anchor
        while anchor is not None and anchor.id in dying:  # the new nodes take the anchor's place
            anchor = graph.node_after(anchor)
        for node in [n for n in self.match.nodes if n.id in dying]:
            graph.remove_node(node, safe=False)  # frees the replaced tensors (and names) for the new nodes
        owners = self._owners(replacement)
        created: list[IrNode] = []
        for index, spec in enumerate(self._specs):
            created.append(self._add(index, spec, anchor, created, owners, replacement))
        self._redirect(replacement, owners)
        for node in self.match.nodes:
            if node.id in dying:
                for t in node.outputs:
                    if t is not None and t not in replacement and not graph.tensor_consumers(t):
                        graph.remove_tensor(t)
        for node in created:
            _drop_unused_outputs(graph, node)
            _infer(graph, registry, node, replacement)
        return created

    @staticmethod
    def _owners(replacement: Mapping[int, TensorRef | NewValue]) -> dict[NewValue, int]:
        """Which old tensor each new output takes over (the first, when several map to one value)."""
        owners: dict[NewValue, int] = {}
        for old, new in replacement.items():
            if isinstance(new, NewValue) and new not in owners:
                owners[new] = old
        return owners

    def _add(
        self,
        index: int,
        spec: _NodeSpec,
        anchor: IrNode | None,
        created: list[IrNode],
        owners: dict[NewValue, int],
        replacement: Mapping[int, TensorRef | NewValue],
    ) -> IrNode:
        """The node of `spec`, producing the old tensors it replaces (ids, names and shapes kept) and
        fresh ones otherwise; named as the rule asked, or after the anchor when it computes the
        anchor's first output (errors and dumps keep pointing at the model)."""
        graph, root = self.graph, self.match.node
        outputs: list[TensorRef] = []
        for k in range(spec.outputs):
            old = owners.get(NewValue(index, k))
            fresh = f"{root.name}/{spec.op_type}_{k}"
            outputs.append(old if old is not None else graph.add_tensor(fresh, DataType.UNDEFINED, Absent()))
        if spec.domain:
            graph.opset_imports.setdefault(spec.domain, 1)
        main = replacement.get(root.outputs[0]) if root.outputs and root.outputs[0] is not None else None
        computes_anchor = isinstance(main, NewValue) and main.spec == index
        name = spec.name or (root.name if computes_anchor else f"{root.name}/{spec.op_type}")
        return graph.add_node(
            spec.op_type,
            [_resolve(t, created) for t in spec.inputs],
            outputs,
            spec.attributes,
            domain=spec.domain,
            name=name,
            before=anchor,
        )

    def _redirect(self, replacement: Mapping[int, TensorRef | NewValue], owners: dict[NewValue, int]) -> None:
        """Uses of an old tensor replaced by an existing value (or by a value another old tensor took
        over) move there, and the old tensor goes."""
        graph = self.graph
        for old, new in replacement.items():
            if isinstance(new, NewValue):
                if owners[new] != old:
                    graph.replace_all_uses(old, owners[new], outputs=True)
                    graph.remove_tensor(old)
                continue
            graph.replace_all_uses(old, graph.tensor(new).id)
            if graph.tensor_producer(old) is None:
                graph.remove_tensor(old)

    def _anchor(self, replacement: Mapping[int, TensorRef | NewValue], dying: set[int]) -> IrNode | Decline | None:
        """The node to insert before: the anchor, unless a replaced tensor comes from an earlier
        matched node (a group, a kept sum), then the earliest place every input is ready."""
        graph, root = self.graph, self.match.node
        early = [graph.tensor_producer(old) for old in replacement]
        if all(p is None or p.id == root.id for p in early):
            return root
        key = graph.order_key
        dying_nodes = [n for n in self.match.nodes if n.id in dying]
        start: IrNode | None = min(dying_nodes, key=key)
        inputs = {t for s in self._specs for t in s.inputs if t is not None and not isinstance(t, NewValue)}
        producers = [p for t in inputs if (p := graph.tensor_producer(t)) is not None and p.id not in dying]
        latest = max(producers, key=key, default=None)
        if latest is not None and start is not None and key(latest) > key(start):
            start = graph.node_after(latest)  # None: append at the end
        uses = [c for old in replacement for c, _ in graph.tensor_consumers(old) if c.id not in dying]
        if uses and (start is None or key(min(uses, key=key)) < key(start)):
            return Decline("an input of the replacement is computed after a use of its result")
        anchor = start
        while anchor is not None and anchor.id in dying:
            anchor = graph.node_after(anchor)
        return anchor


def _resolve(value: TensorRef | NewValue | None, created: list[IrNode]) -> TensorRef | None:
    if isinstance(value, NewValue):
        return created[value.spec].outputs[value.output]
    return value


def _seen_outside(graph: IrGraph, t: int) -> bool:
    return graph.is_graph_output(t) or t in graph.aliases or t in graph.aliases.values()


def _dying(graph: IrGraph, nodes: Sequence[IrNode], replacement: Mapping[int, object]) -> set[int]:
    """Matched nodes whose every output is replaced, or read only by other dying nodes."""
    dying = {n.id for n in nodes}
    changed = True
    while changed:
        changed = False
        for node in nodes:
            if node.id in dying and not all(
                t is None or t in replacement or _dead_with(graph, t, dying) for t in node.outputs
            ):
                dying.discard(node.id)
                changed = True
    return dying


def _dead_with(graph: IrGraph, t: int, dying: set[int]) -> bool:
    return not _seen_outside(graph, t) and all(c.id in dying for c, _ in graph.tensor_consumers(t))


def _drop_unused_outputs(graph: IrGraph, node: IrNode) -> None:
    """Optional outputs (past the first) that nothing reads are left out, as an exporter would."""
    for index in range(len(node.outputs) - 1, 0, -1):
        t = node.outputs[index]
        if t is not None and not graph.tensor_consumers(t) and not graph.is_graph_output(t):
            graph.drop_output(node, index)


def _infer(graph: IrGraph, registry: OperatorRegistry, node: IrNode, adopted: Mapping[int, object]) -> None:
    """Shapes for outputs the node did not adopt; an op without a registered kernel is an error."""
    fresh = [t for t in node.outputs if t is not None and t not in adopted]
    if not fresh:
        return
    operator = registry.get(node.domain, node.op_type, node.opset)
    if operator is None:
        raise InferenceCtx(graph, node).error("a rewrite produced an op no registered operator implements")
    for t, (dtype, shape) in zip(node.outputs, operator.infer_output_shapes(InferenceCtx(graph, node))):
        if t is not None and t in fresh:
            graph.tensor(t).dtype, graph.tensor(t).shape = dtype, shape
